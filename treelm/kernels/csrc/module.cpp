// The Python module of treelm's C++ time loops (built and loaded by treelm/kernels/build.py):
// the ON-LSTM's (csrc/onlstm.cpp, called by treelm/kernels/onlstm_cxx.py) and the LSTM's
// (csrc/lstm.cpp, called by treelm/kernels/lstm_cxx.py). Each releases the GIL while it runs.

#include "common.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "treelm's fused time loops (see treelm/kernels/onlstm_cxx.py, lstm_cxx.py)";
  treelm::bind_onlstm(m);
  treelm::bind_lstm(m);
}
