// The fused ON-LSTM's time loops in C++: the whole forward recurrence (saving for backward or not)
// and the whole BPTT loop, for float32 and float64 CPU tensors. Equations, buffer layout and
// notation: treelm/kernels/onlstm_torch.py (module docstring); the Python wrapper that builds,
// loads and calls this file is treelm/kernels/onlstm_cxx.py; what it shares with the LSTM's loop
// (csrc/lstm.cpp) is in csrc/common.h.
//
// Per step: one recurrent product (on the backend treelm.kernels.gemm measured fastest for the
// shape: torch.mm's mm_out into a preallocated buffer, the packed MKL / oneDNN linear ops, or
// treelm's panels), then the gate math for every batch row in one pass over that row's gates.
// Two schedules, the same numbers:
// - with panels of a few MB at most (Product::by_rows), each thread owns a run of the batch's rows for the whole
//   sequence, one parallel region: its rows of the product, then its rows' gates, step after
//   step, with no join between steps (a row's step needs that row's product alone), and the next
//   step's rows of the whole-sequence buffers fetched into L2 during the product. At the tree
//   config's size a layer's loops ran 1-10% faster so than with a region per product and per
//   gate pass (batch 20 and 64, bf16 and float32: benchmarks/loop_schedules.py);
// - otherwise (a library product, or larger panels, which every thread would read whole at
//   every step) the product splits its own work between threads, then the rows are split with
//   at::parallel_for, two regions per step.
// The element-wise loops are plain loops over arrays with
// branch-free bodies so that the compiler vectorises them; float32's exp is an inlined polynomial
// for that reason (libm's exp is a call the vectoriser cannot look into), float64's is libm's.

#include "common.h"

namespace treelm {
namespace {

// ---------------------------------------------------------------------------------- forward

// Softmax of n logits (max subtracted) into p.
template <typename T>
inline void softmax(const T* z, T* p, int64_t n) {
  T m = z[0];
  for (int64_t k = 1; k < n; ++k) m = z[k] > m ? z[k] : m;
  T s = 0;
  for (int64_t k = 0; k < n; ++k) {
    p[k] = exp_approx(z[k] - m);
    s += p[k];
  }
  T inv = T(1) / s;
  for (int64_t k = 0; k < n; ++k) p[k] *= inv;
}

struct Dims {
  int64_t T, B, H, L, C, G;
  bool symmetric;
};

// One row's gate math at one step (Eqs. 6-14). xp, r (G): the input part and the recurrent
// product (each in the loop's dtype T, or as autocast's bfloat16 products left them, read
// widened: the same numbers as a widened copy, without it), whose sum z_t is written into z (G) and overwritten there by [z_ĩ, z_f̃ | o, ĉ, i, f]; p, m (2L): [p̃_i, p̃_f], [ĩ, f̃]; c_prev, c_new, tc, h (H);
// df, di: this row's levels; ei, ef (H): scratch for ĩ, f̃ expanded to neurons.
template <typename T, typename X, typename R>
inline void forward_row(const Dims& d, const X* RESTRICT xp, const R* RESTRICT r,
                        T* RESTRICT z, T* RESTRICT p, T* RESTRICT m,
                        const T* RESTRICT c_prev, T* RESTRICT c_new, T* RESTRICT tc,
                        T* RESTRICT h, T* RESTRICT df, T* RESTRICT di, T* RESTRICT ei,
                        T* RESTRICT ef) {
  const int64_t L = d.L, C = d.C, H = d.H;
  for (int64_t g = 0; g < d.G; ++g) z[g] = static_cast<T>(xp[g]) + static_cast<T>(r[g]);
  softmax(z, p, L);
  softmax(z + L, p + L, L);
  T* mi = m;
  T* mf = m + L;
  T acc = 0;
  for (int64_t k = 0; k < L; ++k) {  // f̃ = cumsum(p̃_f)
    acc += p[L + k];
    mf[k] = acc;
  }
  if (d.symmetric) {  // ĩ_k = Σ_{j≥k} p̃_i,j
    acc = 0;
    for (int64_t k = L - 1; k >= 0; --k) {
      acc += p[k];
      mi[k] = acc;
    }
  } else {  // ĩ = 1 − cumsum(p̃_i)
    acc = 0;
    for (int64_t k = 0; k < L; ++k) {
      acc += p[k];
      mi[k] = T(1) - acc;
    }
  }
  T si = 0, sf = 0;
  for (int64_t k = 0; k < L; ++k) {
    si += mi[k];
    sf += mf[k];
  }
  *di = si / T(L);
  *df = T(1) - sf / T(L);
  for (int64_t k = 0; k < L; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      ei[k * C + c] = mi[k];
      ef[k * C + c] = mf[k];
    }
  }
  T* zo = z + 2 * L;
  T* zg = zo + H;
  T* zi = zg + H;
  T* zf = zi + H;
  for (int64_t j = 0; j < H; ++j) {
    T o = sigmoid(zo[j]), g = tanh_approx(zg[j]), i = sigmoid(zi[j]), f = sigmoid(zf[j]);
    T w = ef[j] * ei[j];                       // ω = f̃∘ĩ (Eq. 11)
    T fh = f * w + (ef[j] - w);                // f̂, î (Eqs. 12-13)
    T ih = i * w + (ei[j] - w);
    T c = fh * c_prev[j] + ih * g;             // Eq. 14
    T t = tanh_approx(c);
    zo[j] = o;
    zg[j] = g;
    zi[j] = i;
    zf[j] = f;
    c_new[j] = c;
    tc[j] = t;
    h[j] = o * t;
  }
}

template <typename T, typename X>
std::vector<at::Tensor> forward_impl(const at::Tensor& xp, const at::Tensor& h0,
                                     const at::Tensor& c0, Product& prod, const Dims& d,
                                     bool save, int64_t rows) {
  const int64_t T_ = d.T, B = d.B, H = d.H, L = d.L, G = d.G;
  const int64_t n = save ? T_ : 1;
  auto opt = h0.options();
  at::Tensor gates = at::empty({n, B, G}, opt);
  at::Tensor P = at::empty({n, B, 2, L}, opt);
  at::Tensor M = at::empty({T_, B, 2, L}, opt);
  at::Tensor cs = at::empty({save ? T_ + 1 : 2, B, H}, opt);
  at::Tensor tanh_c = at::empty({n, B, H}, opt);
  at::Tensor out = at::empty({T_, B, H}, opt);
  at::Tensor df = at::empty({T_, B}, opt);
  at::Tensor di = at::empty({T_, B}, opt);
  cs[0].copy_(c0);
  at::Tensor h = h0.contiguous();
  // bfloat16 products: h_t also written rounded to bfloat16 by the rows (the next product's left
  // operand), h_0 here. With save, every step's is kept, (h_0, …, h_T): the weight gradient's
  // right operand (h_0 … h_{T-1} in bfloat16) is then these rows as they are, where it was a
  // concatenation of h_0 and out and a cast of it, the same numbers (round_bf16 rounds as the
  // cast does) without two passes over (T·B, H)
  const bool narrow = prod.narrow();
  at::Tensor hl;
  at::BFloat16* hl_p = nullptr;
  if (narrow) {
    hl = at::empty({save ? T_ + 1 : 1, B, H}, opt.dtype(at::kBFloat16));
    hl_p = hl.data_ptr<at::BFloat16>();
    round_bf16(h.data_ptr<T>(), hl_p, B * H);
  }
  const X* xp_p = xp.data_ptr<X>();
  T* gates_p = gates.data_ptr<T>();
  T* P_p = P.data_ptr<T>();
  T* M_p = M.data_ptr<T>();
  T* cs_p = cs.data_ptr<T>();
  T* tc_p = tanh_c.data_ptr<T>();
  T* out_p = out.data_ptr<T>();
  T* df_p = df.data_ptr<T>();
  T* di_p = di.data_ptr<T>();
  // rows [b0, b1) of step t, r_p the product h_{t-1} Uᵀ's rows (as the product left them); e:
  // the thread's scratch (2H)
  auto step = [&](int64_t t, int64_t b0, int64_t b1, const auto* r_p, T* e) {
    const int64_t k = save ? t : 0;
    const int64_t a = save ? t : t % 2, c = save ? t + 1 : (t + 1) % 2;  // slots of c_{t-1}, c_t
    const int64_t next = save ? t + 1 : 0;                                // hl's slot of h_t
    for (int64_t b = b0; b < b1; ++b) {
      forward_row<T>(d, xp_p + (t * B + b) * G, r_p + b * G, gates_p + (k * B + b) * G,
                     P_p + (k * B + b) * 2 * L, M_p + (t * B + b) * 2 * L,
                     cs_p + (a * B + b) * H, cs_p + (c * B + b) * H, tc_p + (k * B + b) * H,
                     out_p + (t * B + b) * H, df_p + t * B + b, di_p + t * B + b, e, e + H);
      if (narrow) round_bf16(out_p + (t * B + b) * H, hl_p + (next * B + b) * H, H);
    }
  };
  if (prod.use_rows(rows)) {
    // each thread owns a run of rows for the whole sequence (Product::by_rows)
    at::parallel_for(0, B, row_grain(H, G), [&](int64_t b0, int64_t b1) {
      std::vector<T> e(2 * H);
      for (int64_t t = 0; t < T_; ++t) {
        prefetch_l2(xp_p + (t * B + b0) * G, (b1 - b0) * G);  // during the product below
        if (narrow) {
          const int64_t now = save ? t : 0;                               // hl's slot of h_{t-1}
          step(t, b0, b1, prod.rows(hl_p + now * B * H, H, b0, b1), e.data());
        } else if constexpr (std::is_same_v<T, float>) {
          const T* h_prev = t == 0 ? h.data_ptr<T>() : out_p + (t - 1) * B * H;
          step(t, b0, b1, prod.rows(h_prev, H, b0, b1), e.data());
        }
      }
    });
  } else {
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t now = save ? t : 0;                                   // hl's slot of h_{t-1}
      const at::Tensor r = narrow ? prod.of(hl[now]) : prod(h);           // h_{t-1} Uᵀ
      auto rows = [&](const auto* r_p) {
        at::parallel_for(0, B, grain(G), [&](int64_t b0, int64_t b1) {
          std::vector<T> e(2 * H);
          step(t, b0, b1, r_p, e.data());
        });
      };
      if (narrow) {
        rows(r.data_ptr<at::BFloat16>());
      } else {
        rows(r.data_ptr<T>());
      }
      h = out[t];
    }
  }
  at::Tensor c_last = cs[save ? T_ : T_ % 2];
  if (save) return {out, c_last, df, di, M, gates, P, cs, tanh_c, narrow ? hl : at::Tensor()};
  return {out, c_last, df, di, M};
}

// --------------------------------------------------------------------------------- backward

// One row's backward step (onlstm_torch.py's equations). dh: δh_t without dout; dout: this step's
// output gradient (zeros where there is none); dc: δc_t in, δc_{t-1} out; dz (G): δz_t;
// lvl_i, lvl_f: this row's δdi_t / L and −δdf_t / L.
template <typename T, typename D>
inline void backward_row(const Dims& d, const T* RESTRICT z, const T* RESTRICT p,
                         const T* RESTRICT m, const T* RESTRICT c_prev, const T* RESTRICT tc,
                         const D* RESTRICT dh, const T* RESTRICT dout, T* RESTRICT dc,
                         T* RESTRICT dz, T lvl_i, T lvl_f, T* RESTRICT ei, T* RESTRICT ef,
                         T* RESTRICT a0, T* RESTRICT a1, T* RESTRICT dw, T* RESTRICT lev) {
  // scratch: ei, ef the level values per neuron; a0 = δc∘ĉ, a1 = δc∘c_{t-1} and dw (summed per
  // level into δω), H each; lev (6L): δĩ, δf̃, δω, δp̃_i, δp̃_f
  const int64_t L = d.L, C = d.C, H = d.H;
  const T* mi = m;
  const T* mf = m + L;
  for (int64_t k = 0; k < L; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      ei[k * C + c] = mi[k];
      ef[k * C + c] = mf[k];
    }
  }
  const T* zo = z + 2 * L;
  const T* zg = zo + H;
  const T* zi = zg + H;
  const T* zf = zi + H;
  T* dzo = dz + 2 * L;
  T* dzg = dzo + H;
  T* dzi = dzg + H;
  T* dzf = dzi + H;
  for (int64_t j = 0; j < H; ++j) {
    T g = static_cast<T>(dh[j]) + dout[j];
    T o = zo[j], t = tc[j];
    dzo[j] = g * t * o * (T(1) - o);
    T dcj = dc[j] + g * o * (T(1) - t * t);
    T gg = zg[j], i = zi[j], f = zf[j];
    T w = ef[j] * ei[j];
    T x0 = dcj * gg, x1 = dcj * c_prev[j];
    dzi[j] = x0 * w * i * (T(1) - i);
    dzf[j] = x1 * w * f * (T(1) - f);
    T ih = i * w + (ei[j] - w);
    T fh = f * w + (ef[j] - w);
    dzg[j] = dcj * ih * (T(1) - gg * gg);
    a0[j] = x0;
    a1[j] = x1;
    dw[j] = x0 * (i - T(1)) + x1 * (f - T(1));
    dc[j] = dcj * fh;                          // δc_{t-1}
  }
  T* dmi = lev;            // δĩ
  T* dmf = lev + L;        // δf̃
  T* dwl = lev + 2 * L;    // δω
  for (int64_t k = 0; k < L; ++k) {
    T s0 = 0, s1 = 0, sw = 0;
    for (int64_t c = 0; c < C; ++c) {
      s0 += a0[k * C + c];
      s1 += a1[k * C + c];
      sw += dw[k * C + c];
    }
    dmi[k] = s0;
    dmf[k] = s1;
    dwl[k] = sw;
  }
  for (int64_t k = 0; k < L; ++k) {
    T s0 = dmi[k];
    dmi[k] = s0 + dwl[k] * mf[k] + lvl_i;
    dmf[k] = dmf[k] + dwl[k] * mi[k] + lvl_f;
  }
  T* dpi = lev + 3 * L;
  T* dpf = lev + 4 * L;
  T acc = 0;
  for (int64_t k = L - 1; k >= 0; --k) {  // δp̃_f = reverse-cumsum(δf̃)
    acc += dmf[k];
    dpf[k] = acc;
  }
  acc = 0;
  if (d.symmetric) {                      // δp̃_i = cumsum(δĩ)
    for (int64_t k = 0; k < L; ++k) {
      acc += dmi[k];
      dpi[k] = acc;
    }
  } else {                                // δp̃_i = −reverse-cumsum(δĩ)
    for (int64_t k = L - 1; k >= 0; --k) {
      acc += dmi[k];
      dpi[k] = -acc;
    }
  }
  const T* pi = p;
  const T* pf = p + L;
  T si = 0, sf = 0;                       // softmax backward
  for (int64_t k = 0; k < L; ++k) {
    si += pi[k] * dpi[k];
    sf += pf[k] * dpf[k];
  }
  for (int64_t k = 0; k < L; ++k) {
    dz[k] = pi[k] * (dpi[k] - si);
    dz[L + k] = pf[k] * (dpf[k] - sf);
  }
}

template <typename T>
std::vector<at::Tensor> backward_impl(const std::optional<at::Tensor>& dout_,
                                      const std::optional<at::Tensor>& dh_last,
                                      const std::optional<at::Tensor>& dc_last,
                                      const std::optional<at::Tensor>& ddf,
                                      const std::optional<at::Tensor>& ddi,
                                      const at::Tensor& gates, const at::Tensor& P,
                                      const at::Tensor& M, const at::Tensor& cs,
                                      const at::Tensor& tanh_c, Product& prod, const Dims& d,
                                      int64_t rows) {
  const int64_t T_ = d.T, B = d.B, H = d.H, L = d.L, G = d.G;
  auto opt = gates.options();
  // bfloat16 products: δz_t written rounded to bfloat16 only (the per-step product's left
  // operand, δU's and δxp's), each row through a float scratch row
  const bool narrow = prod.narrow();
  at::Tensor dG = at::empty({T_, B, G}, narrow ? opt.dtype(at::kBFloat16) : opt);
  at::Tensor dc = dc_last.has_value() ? dc_last->contiguous().clone() : at::zeros({B, H}, opt);
  // δh_t from step t + 1 (the product's output), or δh_T (zero without one)
  at::Tensor dh = dh_last.has_value() ? dh_last->contiguous().clone() : at::zeros({B, H}, opt);
  at::Tensor dout;
  if (dout_.has_value()) dout = dout_->contiguous();  // a sum's gradient may be an expanded view
  const std::vector<T> zeros(H, T(0));               // the output gradient where there is none
  at::Tensor lvl;  // (T, B, 2): [δdi / L, −δdf / L]
  if (ddf.has_value() || ddi.has_value()) {
    lvl = at::zeros({T_, B, 2}, opt);
    if (ddi.has_value()) lvl.select(2, 0).copy_(*ddi / static_cast<double>(L));
    if (ddf.has_value()) lvl.select(2, 1).copy_(*ddf / static_cast<double>(-L));
  }
  const T* gates_p = gates.data_ptr<T>();
  const T* P_p = P.data_ptr<T>();
  const T* M_p = M.data_ptr<T>();
  const T* cs_p = cs.data_ptr<T>();
  const T* tc_p = tanh_c.data_ptr<T>();
  const T* dout_p = dout.defined() ? dout.data_ptr<T>() : nullptr;
  const T* lvl_p = lvl.defined() ? lvl.data_ptr<T>() : nullptr;
  T* dG_p = narrow ? nullptr : dG.data_ptr<T>();
  at::BFloat16* dGl_p = narrow ? dG.data_ptr<at::BFloat16>() : nullptr;
  T* dc_p = dc.data_ptr<T>();
  // rows [b0, b1) of step t, dh_p δh_t's rows; e, f, dz: the thread's scratch (5H, 6L, G or 0)
  auto step = [&](int64_t t, int64_t b0, int64_t b1, const auto* dh_p, T* e, T* f, T* dz) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r = t * B + b;
      backward_row<T>(d, gates_p + r * G, P_p + r * 2 * L, M_p + r * 2 * L, cs_p + r * H,
                      tc_p + r * H, dh_p + b * H, dout_p ? dout_p + r * H : zeros.data(),
                      dc_p + b * H, narrow ? dz : dG_p + r * G,
                      lvl_p ? lvl_p[2 * r] : T(0), lvl_p ? lvl_p[2 * r + 1] : T(0), e, e + H,
                      e + 2 * H, e + 3 * H, e + 4 * H, f);
      if (narrow) round_bf16(dz, dGl_p + r * G, G);
    }
  };
  if (prod.use_rows(rows)) {
    // each thread owns a run of rows for the whole sequence (Product::by_rows): δh_T in T
    // first, then the product's rows δh_{t-1} = δz_t U as they came
    const T* dh_last_p = dh.data_ptr<T>();
    at::parallel_for(0, B, row_grain(G, H), [&](int64_t b0, int64_t b1) {
      std::vector<T> e(5 * H), f(6 * L), dz(narrow ? G : 0);
      for (int64_t t = T_ - 1; t >= 0; --t) {
        if (t > 0) {  // step t - 1's rows, during step t's product below
          const int64_t r = (t - 1) * B + b0, n = b1 - b0;
          prefetch_l2(gates_p + r * G, n * G);
          prefetch_l2(cs_p + r * H, n * H);
          prefetch_l2(tc_p + r * H, n * H);
          if (dout_p) prefetch_l2(dout_p + r * H, n * H);
        }
        if (narrow) {
          if (t == T_ - 1) {
            step(t, b0, b1, dh_last_p, e.data(), f.data(), dz.data());
          } else {
            step(t, b0, b1, prod.res.template data_ptr<at::BFloat16>(), e.data(), f.data(),
                 dz.data());
          }
          prod.rows(dGl_p + t * B * G, G, b0, b1);
        } else if constexpr (std::is_same_v<T, float>) {
          step(t, b0, b1, t == T_ - 1 ? dh_last_p : prod.res.template data_ptr<T>(), e.data(),
               f.data(), dz.data());
          prod.rows(dG_p + t * B * G, G, b0, b1);
        }
      }
    });
    dh = prod.res;
  } else {
    for (int64_t t = T_ - 1; t >= 0; --t) {
      auto rows = [&](const auto* dh_p) {
        at::parallel_for(0, B, grain(G), [&](int64_t b0, int64_t b1) {
          std::vector<T> e(5 * H), f(6 * L), dz(narrow ? G : 0);
          step(t, b0, b1, dh_p, e.data(), f.data(), dz.data());
        });
      };
      // δh_t: δh_T in T, then the product's result as it came (bfloat16 under autocast)
      if (dh.scalar_type() == at::kBFloat16) {
        rows(dh.data_ptr<at::BFloat16>());
      } else {
        rows(dh.data_ptr<T>());
      }
      dh = narrow ? prod.of(dG[t]) : prod(dG[t]);  // δh_{t-1} = δz_t U
    }
  }
  return {dG, dh.to(gates.scalar_type()), dc};
}

Dims dims(const at::Tensor& gates_like, int64_t T, int64_t B, int64_t H, int64_t L,
          bool symmetric) {
  TORCH_CHECK(L > 0 && H % L == 0, "hidden size ", num(H), " is not a multiple of ", num(L),
              " levels");
  TORCH_CHECK(gates_like.size(-1) == 4 * H + 2 * L, "gate width ",
              num(gates_like.size(-1)), " is not 4H + 2L = ", num(4 * H + 2 * L));
  return Dims{T, B, H, L, H / L, 4 * H + 2 * L, symmetric};
}

}  // namespace

// xp (T, B, G) input projections with both biases; h0, c0 (B, H); the recurrent product a -> a Uᵀ
// as (kind, w, packed, batch). Returns out, c_T, df, di, M and, with save, gates, P, cs, tanh_c
// and h_0 … h_T (T + 1, B, H) as the bfloat16 products read them (None for float products).
// rows: 1 threads own rows where the panels allow (Product::by_rows), 0 never, 2 wherever the
// product is a panel one (common.h Product::use_rows).
std::vector<at::Tensor> onlstm_forward(const at::Tensor& xp_, const at::Tensor& h0,
                                       const at::Tensor& c0, int64_t kind, at::Tensor w,
                                       std::optional<at::Tensor> packed, int64_t n_levels,
                                       bool symmetric, bool save, int64_t rows) {
  TORCH_CHECK(xp_.dim() == 3 && h0.dim() == 2 && c0.dim() == 2, "expected xp (T, B, G), "
              "h0 and c0 (B, H)");
  const at::Tensor xp = xp_.contiguous();
  const auto dtype = h0.scalar_type();
  // xp in the loop's dtype, or as autocast's bfloat16 projection left it (read widened)
  check_cpu(xp, "xp", xp.scalar_type() == at::kBFloat16 ? at::kBFloat16 : dtype);
  check_cpu(h0, "h0", dtype);
  check_cpu(c0, "c0", dtype);
  const int64_t T = xp.size(0), B = xp.size(1), H = h0.size(1);
  TORCH_CHECK(T > 0, "an empty sequence");
  TORCH_CHECK(h0.size(0) == B && c0.size(0) == B && c0.size(1) == H, "state shapes");
  Dims d = dims(xp, T, B, H, n_levels, symmetric);
  Product prod(kind, std::move(w), std::move(packed), B, h0, H, d.G);
  std::vector<at::Tensor> r;
  AT_DISPATCH_FLOATING_TYPES(dtype, "onlstm_forward", [&] {
    if (xp.scalar_type() == at::kBFloat16) {
      r = forward_impl<scalar_t, at::BFloat16>(xp, h0, c0, prod, d, save, rows);
    } else {
      r = forward_impl<scalar_t, scalar_t>(xp, h0, c0, prod, d, save, rows);
    }
  });
  return r;
}

// The BPTT loop over a save=True forward's buffers; the product a -> a U as (kind, w, packed,
// batch). Returns δz (T, B, G) (= δxp; in bfloat16 when the products are), δh_0 and δc_0 (B, H);
// the weight gradient is left to the caller (one GEMM over all steps); rows as the forward's.
std::vector<at::Tensor> onlstm_backward(std::optional<at::Tensor> dout,
                                        std::optional<at::Tensor> dh_last,
                                        std::optional<at::Tensor> dc_last,
                                        std::optional<at::Tensor> ddf,
                                        std::optional<at::Tensor> ddi, const at::Tensor& gates,
                                        const at::Tensor& P, const at::Tensor& M,
                                        const at::Tensor& cs, const at::Tensor& tanh_c,
                                        int64_t kind, at::Tensor w,
                                        std::optional<at::Tensor> packed, bool symmetric,
                                        int64_t rows) {
  const auto dtype = gates.scalar_type();
  for (const auto* t : {&gates, &P, &M, &cs, &tanh_c}) {
    check_cpu(*t, "a saved buffer", dtype);
    TORCH_CHECK(t->is_contiguous(), "saved buffers must be contiguous");
  }
  const int64_t T = gates.size(0), B = gates.size(1), H = cs.size(2), L = M.size(3);
  Dims d = dims(gates, T, B, H, L, symmetric);
  auto as_dtype = [&](std::optional<at::Tensor>& t) {
    if (t.has_value()) {
      check_cpu(*t, "a gradient", t->scalar_type());
      *t = t->to(dtype);
    }
  };
  as_dtype(dout);
  as_dtype(dh_last);
  as_dtype(dc_last);
  as_dtype(ddf);
  as_dtype(ddi);
  Product prod(kind, std::move(w), std::move(packed), B, gates, d.G, H);
  std::vector<at::Tensor> r;
  AT_DISPATCH_FLOATING_TYPES(dtype, "onlstm_backward", [&] {
    r = backward_impl<scalar_t>(dout, dh_last, dc_last, ddf, ddi, gates, P, M, cs, tanh_c, prod,
                                d, rows);
  });
  return r;
}

// round_bf16 on a float32 tensor (for the tests: against PyTorch's own rounding)
at::Tensor round_bf16_tensor(const at::Tensor& x_) {
  const at::Tensor x = x_.contiguous();
  check_cpu(x, "x", at::kFloat);
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBFloat16));
  round_bf16(x.data_ptr<float>(), out.data_ptr<at::BFloat16>(), x.numel());
  return out;
}

void bind_onlstm(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("round_bf16", &round_bf16_tensor, "float32 -> bfloat16 as the loops round",
        py::arg("x"));
  m.def("forward", &onlstm_forward, "ON-LSTM forward recurrence",
        py::arg("xp"), py::arg("h0"), py::arg("c0"), py::arg("kind"), py::arg("w"),
        py::arg("packed"), py::arg("n_levels"), py::arg("symmetric"), py::arg("save"),
        py::arg("rows") = 1, py::call_guard<py::gil_scoped_release>());
  m.def("backward", &onlstm_backward, "ON-LSTM BPTT loop", py::arg("dout"),
        py::arg("dh_last"), py::arg("dc_last"), py::arg("ddf"), py::arg("ddi"),
        py::arg("gates"), py::arg("P"), py::arg("M"), py::arg("cs"), py::arg("tanh_c"),
        py::arg("kind"), py::arg("w"), py::arg("packed"), py::arg("symmetric"),
        py::arg("rows") = 1, py::call_guard<py::gil_scoped_release>());
}

}  // namespace treelm
