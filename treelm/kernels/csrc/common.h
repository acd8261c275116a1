// What treelm's C++ kernels share (the time loops csrc/onlstm.cpp and csrc/lstm.cpp, the softmax
// cross-entropy csrc/softmax_ce.cpp, the hashed dropout csrc/hash_dropout.cpp; bound to Python in
// csrc/module.cpp): float32 exp/sigmoid/tanh the compiler can vectorise, the per-step recurrent
// product on the GEMM backend treelm.kernels.gemm measured fastest, and the entry points.

#pragma once

#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace treelm {

// A number in an error message (TORCH_CHECK), as text. Streaming an integer itself instantiates
// the stream's number formatting inside this library: where the compiler's C++ library differs
// from the one torch was built with, that copy crashed (a segmentation fault in
// std::basic_ostream::_M_insert<long>, seen under torch 2.11 on a GPU machine's host with its own
// g++), while text is passed on as is.
inline std::string num(int64_t v) { return std::to_string(v); }

// A row's arrays never overlap: saying so lets the compiler vectorise loops that touch a dozen of
// them (it gives up on checking that many pairs at run time).
#define RESTRICT __restrict__

// ------------------------------------------------------------------------------------ math

// exp for float32, accurate to about 2 ulp on [-87, 88] and clamped outside (exp(-87) ~ 1.6e-38,
// which the gates round to the same 0 and 1 as the exact value): Cody-Waite range reduction
// x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for exp(r) (Cephes' expf coefficients),
// and 2^n assembled in the exponent bits. Rounding n by adding and subtracting 1.5 * 2^23 keeps it
// free of calls (floor/nearbyint are library calls without SSE4.1).
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float shifter = 12582912.0f;  // 1.5 * 2^23
  float n = x * 1.44269504088896341f + shifter;
  n = n - shifter;
  float r = x - n * 0.693359375f;      // ln2 in two parts: hi exact in float, lo the rest
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;   // 2^n, n in [-126, 127]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double exp_approx(double x) { return std::exp(x); }

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + exp_approx(-x));
}

// tanh x = sign(x) (1 − e) / (1 + e), e = exp(−2|x|): no overflow, absolute error ~1e-7 in float32
inline float tanh_approx(float x) {
  float a = x < 0.0f ? -x : x;
  float e = exp_approx(-2.0f * a);
  float t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
}

inline double tanh_approx(double x) { return std::tanh(x); }

// --------------------------------------------------------------------------------- products

// n float32 values rounded to bfloat16 as PyTorch rounds them (to nearest, ties to even; a NaN
// to the quiet NaN 0x7FC0), in a branch-free body the compiler vectorises: a loop writes the
// operands of its next bfloat16 product itself, row by row, instead of a cast per step.
inline void round_bf16(const float* RESTRICT src, at::BFloat16* RESTRICT dst, int64_t n) {
  uint16_t* out = reinterpret_cast<uint16_t*>(dst);
  for (int64_t k = 0; k < n; ++k) {
    uint32_t u;
    std::memcpy(&u, src + k, sizeof u);
    const uint32_t r = (u + UINT32_C(0x7FFF) + ((u >> 16) & 1)) >> 16;
    out[k] = src[k] != src[k] ? UINT16_C(0x7FC0) : static_cast<uint16_t>(r);
  }
}
inline void round_bf16(const double*, at::BFloat16*, int64_t) {
  TORCH_CHECK(false, "bfloat16 products of a float64 loop");
}

// csrc/panel_gemm.cpp: B (N, K) packed into column panels (32 columns in an AVX-512 build, 16
// otherwise: panel_columns()), and out (M, N) = a · Bᵀ from them
at::Tensor panel_pack(const at::Tensor& b);
void panel_mm_out(const at::Tensor& a, const at::Tensor& packed, int64_t n, at::Tensor& out);
// that `packed` holds panels for (M, K) · Bᵀ with N = n in `dtype` (and the CPU runs them)
void panel_check(const at::Tensor& packed, int64_t K, int64_t n, at::ScalarType dtype);
// rows [r0, r1) of C (M, n), row stride n, = A (row stride lda) · Bᵀ from the panels, on the
// calling thread (a loop's own parallel region calls it for the rows a thread owns)
void panel_rows(const at::Tensor& packed, int64_t K, int64_t n, const float* A, int64_t lda,
                float* C, int64_t r0, int64_t r1);
void panel_rows(const at::Tensor& packed, int64_t K, int64_t n, const at::BFloat16* A,
                int64_t lda, at::BFloat16* C, int64_t r0, int64_t r1);

// The largest panels (bytes) a loop's threads each read whole at every step when they own their
// rows (Product::by_rows). On 2 Zen 5 cores (1 MB of L2 each; benchmarks/loop_schedules.py,
// loop_schedules-zen5-20261129.json) the tree config's (1.3 MiB in bfloat16, 2.6 in float32)
// ran a layer's loops 1-10% faster so, at batch 20 and 64; the paper size's float32 ones (21 MiB)
// 14% (forward) and 76% (backward) slower, its bfloat16 ones (11 MiB) within 1%
constexpr int64_t ROWS_PANEL_BYTES = int64_t(4) << 20;

// The per-step product a -> a W' (W' = Uᵀ forward, U backward) as treelm.kernels.gemm prepared
// it: kind 0 torch.mm against `w` (the (K, N) right operand, possibly a transposed view), kind 1
// MKL's packed linear (`packed`, with `w` the (N, K) weight it was packed from), kind 2 oneDNN's
// linear against `w` (packed or plain), kind 3 treelm's panel product (csrc/panel_gemm.cpp:
// `packed` the panels, `w` the (N, K) weight or view they were packed from; float32, and
// bfloat16 where panel_bf16()). When
// `w` has another dtype than the loop's (autocast's bfloat16 products), the left operand is
// copied into a buffer of that dtype first and the result, rounded to that dtype, is widened to
// the loop's, as treelm.kernels.gemm.CastMatmul does. The caller adds the input part itself (in
// the gate loop), saving a pass over memory.
struct Product {
  int64_t kind;
  at::Tensor w, packed;
  int64_t batch;
  at::Tensor low, res, wide;  // cast left operand; torch.mm's or the panels' result; widened
  int64_t k_;                 // the left operand's columns

  Product(int64_t kind_, at::Tensor w_, std::optional<at::Tensor> packed_, int64_t batch_,
          const at::Tensor& like, int64_t k, int64_t n)
      : kind(kind_), w(std::move(w_)), batch(batch_), k_(k) {
    TORCH_CHECK(kind >= 0 && kind <= 3, "unknown product kind ", num(kind));
    if (packed_.has_value()) packed = *packed_;
    TORCH_CHECK((kind != 1 && kind != 3) || packed.defined(),
                "an MKL or panel product needs its packed weight");
    auto in_w = like.options().dtype(w.scalar_type());
    if (w.scalar_type() != like.scalar_type()) {
      low = at::empty({batch, k}, in_w);
      wide = at::empty({batch, n}, like.options());
    }
    if (kind == 0 || kind == 3) res = at::empty({batch, n}, in_w);
    if (kind == 3) panel_check(packed, k, n, w.scalar_type());
  }

  at::Tensor packed_call(const at::Tensor& a) const {
    torch::jit::Stack stack;
    if (kind == 1) {
      static const c10::OperatorHandle mkl =
          c10::Dispatcher::singleton().findSchemaOrThrow("mkl::_mkl_linear", "");
      stack = {a, packed, w, c10::IValue(), batch};
      mkl.callBoxed(&stack);
    } else {
      static const c10::OperatorHandle onednn =
          c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn::_linear_pointwise", "");
      stack = {a, w, c10::IValue(), std::string("none"),
               c10::List<std::optional<at::Scalar>>(), std::string("")};
      onednn.callBoxed(&stack);
    }
    return stack[0].toTensor();
  }

  // Whether w is bfloat16 where the loop is not: a loop may then write its left operand in
  // bfloat16 itself and read the result as it comes (of()) instead of widened, the same
  // numbers without two copies per step.
  bool narrow() const { return low.defined() && w.scalar_type() == at::kBFloat16; }

  // lhs W' (B, N), contiguous, in w's dtype, from a left operand already in w's dtype (a loop
  // that writes its operand so calls this directly: narrow()): one of this object's buffers
  // (valid until the next call) or the packed op's fresh result
  at::Tensor of(const at::Tensor& lhs) {
    if (kind == 3) {
      panel_mm_out(lhs, packed, res.size(1), res);
      return res;
    }
    return kind == 0 ? at::mm_out(res, lhs, w) : packed_call(lhs).contiguous();
  }

  // a W' (B, N), contiguous, in the loop's dtype: a cast to w's dtype first where it differs
  at::Tensor operator()(const at::Tensor& a) {
    if (!low.defined()) return of(a);
    return wide.copy_(of(low.copy_(a)));
  }

  // Whether a loop's threads may each own a run of the batch's rows for the whole sequence,
  // calling rows() from inside one parallel region: a panel product whose left operand the
  // loop writes in w's dtype itself (its own dtype, or narrow()). Why: a step's row b needs
  // row b of the product alone, and the product's row b needs row b of the step before alone,
  // so the rows never meet. The loops then open one parallel region per sequence instead of
  // two per step (a join each, the other threads spinning meanwhile), and each thread's rows of
  // h_t, the product and the gates stay in its own core's caches (the panels, read-only, are
  // read by every thread). Each element's sum is the same tile's in the same order: the same
  // bits as operator() and of(). But then every thread reads all the panels at every step,
  // where the per-step schedule splits them: only for panels of at most ROWS_PANEL_BYTES.
  bool by_rows() const { return rows_possible() && packed.nbytes() <= ROWS_PANEL_BYTES; }
  bool rows_possible() const { return kind == 3 && (!low.defined() || narrow()); }

  // a loop's `rows` argument: 0 the per-step schedule, 1 threads own rows where by_rows() (the
  // default), 2 wherever the product allows it (benchmarks/loop_schedules.py, the tests)
  bool use_rows(int64_t rows) const {
    TORCH_CHECK(rows >= 0 && rows <= 2, "rows is 0, 1 or 2, not ", num(rows));
    return rows == 2 ? rows_possible() : rows == 1 && by_rows();
  }

  // rows [r0, r1) of res (= lhs W', row stride N) from lhs's (row stride lda), on this thread
  template <typename E>
  E* rows(const E* lhs, int64_t lda, int64_t r0, int64_t r1) {
    E* out = res.data_ptr<E>();
    panel_rows(packed, k_, res.size(1), lhs, lda, out, r0, r1);
    return out;
  }
};

// Rows per parallel task: enough work per task that a small batch (decoding, batch-1
// evaluation) runs on the calling thread alone.
inline int64_t grain(int64_t gate_width) { return std::max<int64_t>(1, 32768 / gate_width); }

// Fetch n elements from p on into L2 (one prefetch per 64-byte line): a loop whose threads own
// their rows asks for the next step's rows before a step's product, which then hides the wait
// (the rows of a (T, B, ·) buffer of the whole sequence come from L3 or memory)
template <typename E>
inline void prefetch_l2(const E* p, int64_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t i = 0; i < n * static_cast<int64_t>(sizeof(E)); i += 64)
    __builtin_prefetch(c + i, 0, 2);
}

// Rows per thread of a loop whose threads own their rows (Product::by_rows), for a step's
// product (B, k) · (k, n): about 65,536 multiply-adds a step at least (as the panel product's
// own split), so that a small layer runs on the calling thread alone
inline int64_t row_grain(int64_t k, int64_t n) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, k * n));
}

inline void check_cpu(const at::Tensor& t, const char* name, at::ScalarType dtype) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == dtype, name, " has dtype ", t.scalar_type(), ", expected ",
              dtype);
}

// ------------------------------------------------------------------------------ entry points

// Each loop's file defines its functions and binds them into the Python module (module.cpp).
void bind_onlstm(pybind11::module_& m);      // csrc/onlstm.cpp
void bind_lstm(pybind11::module_& m);        // csrc/lstm.cpp
void bind_softmax_ce(pybind11::module_& m);  // csrc/softmax_ce.cpp
void bind_hash_dropout(pybind11::module_& m);  // csrc/hash_dropout.cpp
void bind_panel_gemm(pybind11::module_& m);  // csrc/panel_gemm.cpp
void bind_cpu_cache(pybind11::module_& m);   // csrc/cpu_cache.cpp

}  // namespace treelm
