// Dropout whose mask is a function of (seed, element index), for treelm/kernels/hash_dropout.py:
//
//   u_i   = mix(mix(i · 0x9E3779B9 ⊕ s_0) ⊕ s_1) >> 8    24 random bits; s_0, s_1 the seed's halves
//   out_i = x_i / (1 − p)   if u_i ≥ ⌈p · 2^24⌉         (U_i = u_i / 2^24 ≥ p: kept with
//         = 0               otherwise                    probability 1 − p)
//
// mix is MurmurHash3's 32-bit finaliser (every input bit flips each output bit with probability
// about 1/2). The same call on the output's gradient with the same seed is the backward, so no mask
// is stored, and no random generator is advanced per element.
//
// Why: AWD-LSTM's weight drop draws a new mask over every hidden-to-hidden weight at every batch.
// torch.rand on the CPU draws those numbers one by one from a Mersenne twister (about 2 ms for a
// 1680 × 400 weight on 2 cores), then the comparison, the cast, the scaling and the product are
// four more passes, and the backward another: about 3% of a PTB training step in all (by
// torch.profiler). Here the mask is integer arithmetic the compiler vectorises, in one pass
// forward and one backward. Each element depends on its index only, so the result does not
// depend on the thread count.

#include "common.h"

#include <cmath>

namespace treelm {
namespace {

inline uint32_t mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// Elements [b, e) of x into out (a plain function with unaliased pointers: the compiler
// vectorises its loop, which it would not do inside parallel_for's lambda)
template <typename T>
void drop_range(const T* RESTRICT x, T* RESTRICT out, int64_t b, int64_t e, uint32_t threshold,
                T scale, uint32_t s0, uint32_t s1) {
  const auto first = static_cast<uint32_t>(b);
  const int64_t n = e - b;
  x += b;
  out += b;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t i = first + static_cast<uint32_t>(j);
    const uint32_t u = mix(mix(i * 0x9E3779B9u ^ s0) ^ s1) >> 8;
    out[j] = x[j] * (u >= threshold ? scale : T(0));
  }
}

template <typename T>
void drop_impl(const T* x, T* out, int64_t n, uint32_t threshold, T scale, uint32_t s0,
               uint32_t s1) {
  at::parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    drop_range<T>(x, out, b, e, threshold, scale, s0, s1);
  });
}

at::Tensor hash_dropout(const at::Tensor& x, double p, int64_t seed) {
  TORCH_CHECK(x.device().is_cpu(), "hash_dropout: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "hash_dropout: x has dtype ", x.scalar_type(), ", expected float32 or float64");
  TORCH_CHECK(p >= 0.0 && p < 1.0, "hash_dropout: p must be in [0, 1)");
  TORCH_CHECK(x.numel() <= (int64_t(1) << 32), "hash_dropout: more than 2^32 elements");
  const at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty_like(xc);
  const auto threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));   // p · 2^24
  const auto bits = static_cast<uint64_t>(seed);
  const auto s0 = static_cast<uint32_t>(bits), s1 = static_cast<uint32_t>(bits >> 32);
  if (x.scalar_type() == at::kFloat) {
    drop_impl<float>(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel(), threshold,
                     static_cast<float>(1.0 / (1.0 - p)), s0, s1);
  } else {
    drop_impl<double>(xc.data_ptr<double>(), out.data_ptr<double>(), xc.numel(), threshold,
                      1.0 / (1.0 - p), s0, s1);
  }
  return out;
}

}  // namespace

void bind_hash_dropout(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("hash_dropout", &hash_dropout,
        "x ∘ m / (1 - p), the mask m a hash of (seed, element index)", py::arg("x"), py::arg("p"),
        py::arg("seed"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace treelm
