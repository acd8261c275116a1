// The LSTM's time loops in C++ (what treelm.kernels.lstm_cxx calls): the forward recurrence
// (saving for backward or not) and the BPTT loop, for float32 and float64 CPU tensors, with the
// recurrent products on the backend treelm.kernels.gemm measured fastest (csrc/common.h).
//
// Gates in torch.nn.LSTM's row order [i | f | g | o]; xp_t = x_t W_ihᵀ + b_ih + b_hh:
//
//   z_t = xp_t + h_{t-1} Uᵀ,   i, f, g, o = σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
//   c_t = f ∘ c_{t-1} + i ∘ g,  h_t = o ∘ tanh(c_t)
//
// and backward, for δc = ∂ℓ/∂c_t including the path through h_t:
//
//   δh = δh_t(from step t+1) + δout_t,   δz_o = δh ∘ tanh(c_t) ∘ o(1 − o)
//   δc += δh ∘ o ∘ (1 − tanh² c_t),     δz_i = δc ∘ g ∘ i(1 − i),   δz_f = δc ∘ c_{t-1} ∘ f(1 − f)
//   δz_g = δc ∘ i ∘ (1 − g²),           δc_{t-1} = δc ∘ f,          δh_{t-1} = δz_t U
//
// Why: oneDNN's fused LSTM (what nn.LSTM runs on CPU) has no float32-state bfloat16 mode, so
// under autocast the LSTM ran treelm's Python step loop, a dozen dispatched ops per step. Here a
// step is one product plus one pass per batch row, as in csrc/onlstm.cpp.

#include "common.h"

namespace treelm {
namespace {

// One row at one step: xp, r (4H) the input part and the recurrent product; z (4H) receives the
// activated gates; c_prev, c_new, tc (tanh c_t), h (H).
template <typename T>
inline void lstm_forward_row(int64_t H, const T* RESTRICT xp, const T* RESTRICT r, T* RESTRICT z,
                             const T* RESTRICT c_prev, T* RESTRICT c_new, T* RESTRICT tc,
                             T* RESTRICT h) {
  for (int64_t j = 0; j < H; ++j) {
    T i = sigmoid(xp[j] + r[j]);
    T f = sigmoid(xp[H + j] + r[H + j]);
    T g = tanh_approx(xp[2 * H + j] + r[2 * H + j]);
    T o = sigmoid(xp[3 * H + j] + r[3 * H + j]);
    T c = f * c_prev[j] + i * g;
    T t = tanh_approx(c);
    z[j] = i;
    z[H + j] = f;
    z[2 * H + j] = g;
    z[3 * H + j] = o;
    c_new[j] = c;
    tc[j] = t;
    h[j] = o * t;
  }
}

// One row's backward step: z (4H) the activated gates; dh: δh_t from step t + 1; dout: this
// step's output gradient (zeros where there is none); dc: δc_t in, δc_{t-1} out; dz (4H): δz_t.
template <typename T>
inline void lstm_backward_row(int64_t H, const T* RESTRICT z, const T* RESTRICT c_prev,
                              const T* RESTRICT tc, const T* RESTRICT dh,
                              const T* RESTRICT dout, T* RESTRICT dc, T* RESTRICT dz) {
  for (int64_t j = 0; j < H; ++j) {
    T gh = dh[j] + dout[j];
    T i = z[j], f = z[H + j], g = z[2 * H + j], o = z[3 * H + j], t = tc[j];
    T dcj = dc[j] + gh * o * (T(1) - t * t);
    dz[j] = dcj * g * i * (T(1) - i);
    dz[H + j] = dcj * c_prev[j] * f * (T(1) - f);
    dz[2 * H + j] = dcj * i * (T(1) - g * g);
    dz[3 * H + j] = gh * t * o * (T(1) - o);
    dc[j] = dcj * f;
  }
}

template <typename T>
std::vector<at::Tensor> forward_impl(const at::Tensor& xp, const at::Tensor& h0,
                                     const at::Tensor& c0, Product& prod, bool save) {
  const int64_t T_ = xp.size(0), B = xp.size(1), H = h0.size(1), G = 4 * H;
  const int64_t n = save ? T_ : 1;
  auto opt = xp.options();
  at::Tensor gates = at::empty({n, B, G}, opt);
  at::Tensor cs = at::empty({save ? T_ + 1 : 2, B, H}, opt);
  at::Tensor tanh_c = at::empty({n, B, H}, opt);
  at::Tensor out = at::empty({T_, B, H}, opt);
  cs[0].copy_(c0);
  at::Tensor h = h0.contiguous();
  const T* xp_p = xp.data_ptr<T>();
  T* gates_p = gates.data_ptr<T>();
  T* cs_p = cs.data_ptr<T>();
  T* tc_p = tanh_c.data_ptr<T>();
  T* out_p = out.data_ptr<T>();
  for (int64_t t = 0; t < T_; ++t) {
    const int64_t k = save ? t : 0;
    const int64_t a = save ? t : t % 2, c = save ? t + 1 : (t + 1) % 2;  // slots of c_{t-1}, c_t
    const at::Tensor r = prod(h);                                        // h_{t-1} Uᵀ
    const T* r_p = r.data_ptr<T>();
    at::parallel_for(0, B, grain(G), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        lstm_forward_row<T>(H, xp_p + (t * B + b) * G, r_p + b * G, gates_p + (k * B + b) * G,
                            cs_p + (a * B + b) * H, cs_p + (c * B + b) * H,
                            tc_p + (k * B + b) * H, out_p + (t * B + b) * H);
      }
    });
    h = out[t];
  }
  at::Tensor c_last = cs[save ? T_ : T_ % 2];
  if (save) return {out, c_last, gates, cs, tanh_c};
  return {out, c_last};
}

template <typename T>
std::vector<at::Tensor> backward_impl(const std::optional<at::Tensor>& dout_,
                                      const std::optional<at::Tensor>& dh_last,
                                      const std::optional<at::Tensor>& dc_last,
                                      const at::Tensor& gates, const at::Tensor& cs,
                                      const at::Tensor& tanh_c, Product& prod) {
  const int64_t T_ = gates.size(0), B = gates.size(1), H = cs.size(2), G = 4 * H;
  auto opt = gates.options();
  at::Tensor dG = at::empty({T_, B, G}, opt);
  at::Tensor dc = dc_last.has_value() ? dc_last->contiguous().clone() : at::zeros({B, H}, opt);
  at::Tensor dh = dh_last.has_value() ? dh_last->contiguous().clone() : at::zeros({B, H}, opt);
  at::Tensor dout;
  if (dout_.has_value()) dout = dout_->contiguous();  // a sum's gradient may be an expanded view
  const std::vector<T> zeros(H, T(0));
  const T* gates_p = gates.data_ptr<T>();
  const T* cs_p = cs.data_ptr<T>();
  const T* tc_p = tanh_c.data_ptr<T>();
  const T* dout_p = dout.defined() ? dout.data_ptr<T>() : nullptr;
  T* dG_p = dG.data_ptr<T>();
  T* dc_p = dc.data_ptr<T>();
  for (int64_t t = T_ - 1; t >= 0; --t) {
    const T* dh_p = dh.data_ptr<T>();
    at::parallel_for(0, B, grain(G), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r = t * B + b;
        lstm_backward_row<T>(H, gates_p + r * G, cs_p + r * H, tc_p + r * H, dh_p + b * H,
                             dout_p ? dout_p + r * H : zeros.data(), dc_p + b * H,
                             dG_p + r * G);
      }
    });
    dh = prod(dG[t]);  // δh_{t-1} = δz_t U
  }
  return {dG, dh, dc};
}

}  // namespace

// xp (T, B, 4H) input projections with both biases; h0, c0 (B, H); the recurrent product
// a -> a Uᵀ as (kind, w, packed). Returns out, c_T and, with save, gates, cs, tanh_c.
std::vector<at::Tensor> lstm_forward(const at::Tensor& xp_, const at::Tensor& h0,
                                     const at::Tensor& c0, int64_t kind, at::Tensor w,
                                     std::optional<at::Tensor> packed, bool save) {
  TORCH_CHECK(xp_.dim() == 3 && h0.dim() == 2 && c0.dim() == 2, "expected xp (T, B, 4H), "
              "h0 and c0 (B, H)");
  const at::Tensor xp = xp_.contiguous();
  const auto dtype = xp.scalar_type();
  check_cpu(xp, "xp", dtype);
  check_cpu(h0, "h0", dtype);
  check_cpu(c0, "c0", dtype);
  const int64_t T = xp.size(0), B = xp.size(1), H = h0.size(1);
  TORCH_CHECK(T > 0, "an empty sequence");
  TORCH_CHECK(h0.size(0) == B && c0.size(0) == B && c0.size(1) == H, "state shapes");
  TORCH_CHECK(xp.size(2) == 4 * H, "gate width ", num(xp.size(2)), " is not 4H = ", num(4 * H));
  Product prod(kind, std::move(w), std::move(packed), B, xp, H, 4 * H);
  std::vector<at::Tensor> r;
  AT_DISPATCH_FLOATING_TYPES(dtype, "lstm_forward", [&] {
    r = forward_impl<scalar_t>(xp, h0, c0, prod, save);
  });
  return r;
}

// The BPTT loop over a save=True forward's buffers; the product a -> a U as (kind, w, packed).
// Returns δz (T, B, 4H) (= δxp), δh_0 and δc_0 (B, H); the weight gradient is left to the caller.
std::vector<at::Tensor> lstm_backward(std::optional<at::Tensor> dout,
                                      std::optional<at::Tensor> dh_last,
                                      std::optional<at::Tensor> dc_last, const at::Tensor& gates,
                                      const at::Tensor& cs, const at::Tensor& tanh_c,
                                      int64_t kind, at::Tensor w,
                                      std::optional<at::Tensor> packed) {
  const auto dtype = gates.scalar_type();
  for (const auto* t : {&gates, &cs, &tanh_c}) {
    check_cpu(*t, "a saved buffer", dtype);
    TORCH_CHECK(t->is_contiguous(), "saved buffers must be contiguous");
  }
  for (auto* t : {&dout, &dh_last, &dc_last}) {
    if (t->has_value()) {
      check_cpu(**t, "a gradient", (*t)->scalar_type());
      *t = (*t)->to(dtype);
    }
  }
  const int64_t B = gates.size(1), H = cs.size(2);
  TORCH_CHECK(gates.size(2) == 4 * H, "gate width ", num(gates.size(2)), " is not 4H = ",
              num(4 * H));
  Product prod(kind, std::move(w), std::move(packed), B, gates, 4 * H, H);
  std::vector<at::Tensor> r;
  AT_DISPATCH_FLOATING_TYPES(dtype, "lstm_backward", [&] {
    r = backward_impl<scalar_t>(dout, dh_last, dc_last, gates, cs, tanh_c, prod);
  });
  return r;
}

void bind_lstm(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("lstm_forward", &lstm_forward, "LSTM forward recurrence", py::arg("xp"), py::arg("h0"),
        py::arg("c0"), py::arg("kind"), py::arg("w"), py::arg("packed"), py::arg("save"),
        py::call_guard<py::gil_scoped_release>());
  m.def("lstm_backward", &lstm_backward, "LSTM BPTT loop", py::arg("dout"), py::arg("dh_last"),
        py::arg("dc_last"), py::arg("gates"), py::arg("cs"), py::arg("tanh_c"), py::arg("kind"),
        py::arg("w"), py::arg("packed"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace treelm
