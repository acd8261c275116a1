// The Python module of treelm's C++ time loops (built and loaded by treelm/kernels/build.py):
// the ON-LSTM's (csrc/onlstm.cpp, called by treelm/kernels/onlstm_cxx.py) and the LSTM's
// (csrc/lstm.cpp, called by treelm/kernels/lstm_cxx.py). Each releases the GIL while it runs.

#include "common.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using treelm::lstm_backward;
  using treelm::lstm_forward;
  using treelm::onlstm_backward;
  using treelm::onlstm_forward;
  m.doc() = "treelm's fused time loops (see treelm/kernels/onlstm_cxx.py, lstm_cxx.py)";
  m.def("forward", &onlstm_forward, "ON-LSTM forward recurrence",
        py::arg("xp"), py::arg("h0"), py::arg("c0"), py::arg("kind"), py::arg("w"),
        py::arg("packed"), py::arg("n_levels"), py::arg("symmetric"), py::arg("save"),
        py::call_guard<py::gil_scoped_release>());
  m.def("backward", &onlstm_backward, "ON-LSTM BPTT loop", py::arg("dout"),
        py::arg("dh_last"), py::arg("dc_last"), py::arg("ddf"), py::arg("ddi"),
        py::arg("gates"), py::arg("P"), py::arg("M"), py::arg("cs"), py::arg("tanh_c"),
        py::arg("kind"), py::arg("w"), py::arg("packed"), py::arg("symmetric"),
        py::call_guard<py::gil_scoped_release>());
  m.def("lstm_forward", &lstm_forward, "LSTM forward recurrence", py::arg("xp"), py::arg("h0"),
        py::arg("c0"), py::arg("kind"), py::arg("w"), py::arg("packed"), py::arg("save"),
        py::call_guard<py::gil_scoped_release>());
  m.def("lstm_backward", &lstm_backward, "LSTM BPTT loop", py::arg("dout"), py::arg("dh_last"),
        py::arg("dc_last"), py::arg("gates"), py::arg("cs"), py::arg("tanh_c"), py::arg("kind"),
        py::arg("w"), py::arg("packed"), py::call_guard<py::gil_scoped_release>());
}
