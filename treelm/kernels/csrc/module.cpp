// The Python module of treelm's C++ time loops (built and loaded by treelm/kernels/build.py):
// the ON-LSTM's (csrc/onlstm.cpp, called by treelm/kernels/onlstm_cxx.py) and the LSTM's
// (csrc/lstm.cpp, called by treelm/kernels/lstm_cxx.py), and the output layer's softmax
// cross-entropy by rows (csrc/softmax_ce.cpp, treelm/kernels/softmax_ce.py), and dropout with a
// hashed mask (csrc/hash_dropout.cpp, treelm/kernels/hash_dropout.py), and the panel product of
// the per-step recurrent products (csrc/panel_gemm.cpp, the GEMM backend "panel" of
// treelm/kernels/gemm/backends.py), and the caching allocator of large CPU blocks
// (csrc/cpu_cache.cpp, treelm/kernels/cpu_cache.py). Each loop releases the GIL while it runs.

#include "common.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "treelm's time loops, softmax cross-entropy and hashed dropout (treelm/kernels/)";
  treelm::bind_onlstm(m);
  treelm::bind_lstm(m);
  treelm::bind_softmax_ce(m);
  treelm::bind_hash_dropout(m);
  treelm::bind_panel_gemm(m);
  treelm::bind_cpu_cache(m);
}
