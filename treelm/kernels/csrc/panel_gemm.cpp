// A float32 product for a time loop's few rows: C (M, N) = A (M, K) · Bᵀ, B (N, K) packed once
// per sequence into column panels, for the per-step recurrent products of the fused loops
// (csrc/onlstm.cpp, csrc/lstm.cpp through Product, common.h) and the Python loops (the GEMM
// backend "panel", treelm/kernels/gemm/backends.py).
//
//   packed[p][k][j] = B[p·NR + j][k]          (P = ⌈N / NR⌉ panels of NR columns, K rows; the
//                                              last panel's missing columns are zeros)
//   C[i][p·NR + j]  = Σ_k A[i][k] · packed[p][k][j]
//
// NR depends on the instruction set the extension is built for (treelm/kernels/build.py), and so
// does the packed layout: NR = 32 with AVX-512, 16 otherwise; panel_columns() says which, and
// panel_mm refuses panels packed by another build.
//
// Why: at batch 20 a step's product (20×1150)·(1150×4830) is too short in M for the library
// kernels, which reach about 60% of the FMA peak on it with AVX2 (the per-step products are half
// of a training step at the paper's size). Here each thread takes a run of panels (for_tasks:
// whole panels but at the run's ends); for each panel, rows go MR at a time through a register
// tile of MR × NR accumulators:
// - AVX2: MR = 5, NR = 16 (10 of the 16 registers, two for the panel's row, one for A's
//   broadcast): per k, two loads of the panel and 5 broadcasts of A feed 10 FMAs.
// - AVX-512: MR = 10, NR = 32 (20 of the 32 zmm registers, two for the panel's row, one for the
//   broadcast): per k, two loads and 10 broadcasts feed 20 FMAs, and a batch of 20 is two tiles,
//   so each panel is read from L2 twice instead of four times. Of tiles of 5 to 14 rows timed on
//   a 2-core Xeon, 10 was the fastest at batch 20 (at batch 64, evaluation's, 8 or 14 rows were
//   3-10% faster). Against the libraries, every backend taking turns: benchmarks/panel_tiles.py
//   (its record: the tree config's per-step products 12-15% faster than MKL's and torch.mm's at
//   2 threads, the paper size's forward too; its backward stays with the libraries).
// The panel (K × NR × 4 bytes) comes from memory (L3 at best: the paper's weight is 22 MB) for
// the first tile and stays in L2 for the others, as A does. While the last tile runs, it fetches
// the next panel into L2, one 64-byte line per line of the panel: on the AVX2 proxy, without
// that, the first tile of every panel waited on L3, and the product above took 1.7 ms (oneDNN:
// 1.9); with it 1.15 ms, near the FMA peak (the backward's (20×4830)·(4830×1150), whose panels
// are four times longer, gains nothing from it). With the AVX-512 tiles, left out, the forward
// products ran 5-20% slower on one thread. Cutting K into L1-sized stretches (GotoBLAS's
// blocking) measured slower: the panels' reads lose their long runs in order.
// A time loop whose threads own the batch's rows (csrc/onlstm.cpp, Product::by_rows in common.h)
// calls panel_rows instead: its rows of every panel on the calling thread, in tiles of even sizes.
// Without AVX2 and FMA the same loops run in plain C++ (the backend is then measured slower and
// not chosen). Results differ from torch.mm's in the rounding of the K-sum's order only.
//
// bfloat16 (autocast's products), in an AVX-512 build on a CPU with avx512_bf16 (panel_bf16()):
//
//   packed[p][k/2][2j + k%2] = B[p·NR + j][k]     (K/2 rounded up: an odd K's last pair padded
//                                                   with a zero)
//   C[i][p·NR + j] = bf16( Σ_k A[i][k] · packed… )  (float32 sums, rounded once at the end)
//
// vdpbf16ps multiplies pairs: one instruction adds a[2i]·b[2i] + a[2i+1]·b[2i+1] into each of 16
// float32 lanes, so a register of a panel's row holds 16 columns × 2 k, A's two values k, k+1 are
// broadcast as one 32-bit word, and the same 10 × 32 tile does twice the multiply-adds per
// instruction of the float32 one. Why: on a 2-core Zen 5 at batch 20 oneDNN's bf16 linear ran
// the tree config's per-step products at 55-60% of the two cores' vdpbf16ps peak, and they were
// a fifth of a bf16 training step; these tiles run them at 86-91% (benchmarks/panel_tiles.py
// --dtype bfloat16, record panel_tiles-zen5-bf16-20261129.json). The sums are float32 as oneDNN's are (vdpbf16ps treats
// denormal inputs as zero, as oneDNN's bf16 kernels on this instruction do); the result is
// rounded to bfloat16 to the nearest, ties to even, as PyTorch rounds (common.h round_bf16),
// since autocast's product returns bfloat16.
//
// Each bfloat16 panel is padded with zero rows of pairs to a multiple of 16 (BF16_BLOCK): the
// tensor panel_pack returns is a view of (P, ⌈K/2⌉, 2·NR) whose panels lie BF16_BLOCK-row
// blocks apart (stride(0) = bf16_rows(K) · 2·NR), so that its shape still names K.
//
// AMX (Intel's tile unit), where the CPU has amx_bf16 and Linux grants the tile state
// (panel_amx(); TREELM_PANEL_AMX=0 leaves it alone): the same panels through tdpbf16ps, which
// multiplies a tile of R rows × 32 k of A by 32 k (16 rows of pairs) × 16 columns of a panel,
// adding into R × 16 float32 sums:
//
//   tiles 0, 1: the sums of the panel's two halves; 2: A's block (R × 64 bytes); 3, 4: the
//   panel's halves of the block (16 rows of 64 bytes, 128 apart: the layout above as it is).
//   C[i][j] = bf16( sums[i][j] ), the blocks added in order of k
//
// One chain of sums per half: the tiles' first form split each half's sums into two chains
// (even and odd blocks), so that a tdpbf16ps need not wait on the one before; on the Xeon a
// dependent tdpbf16ps issued as often as independent ones, and the split form's products were
// the slower ones.
//
// The last block of a K that is no multiple of 32 reads A from a copy of its last columns
// padded with zeros (the panel's own padding is zero too), so no tile reads past a row.
// Why: on a 2-core Intel Xeon (6/167, AMX), which issues vdpbf16ps at half its float32 FMA rate,
// the tree config's per-step products (20×400)·(400×1680) and (20×1680)·(1680×400) took 38 and
// 36 µs on oneDNN at 2 threads and 20 and 24 µs on these tiles
// (benchmarks/panel_tiles.py --dtype bfloat16, panel_tiles-xeon-amx-bf16-20261201.json), and
// oneDNN's re-packing of the weight at every sequence was 13% of a bf16 training step
// (step_profile-xeon-amx-bf16-20261201.json; the panels pack in one plain pass). Each row's
// sums are the same whatever the tile's other rows, so the loops' two schedules give the same
// bits here too; they differ from the vdpbf16ps tiles' in the sums' order.

#include "common.h"

#include <cstring>

#include <sys/syscall.h>
#include <unistd.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define TREELM_PANEL_AVX512 1
// the bfloat16 tiles' intrinsics and CPU test need GCC 10 or clang 11 (older compilers build the
// rest, and panel_bf16() says false)
#if (defined(__clang__) && __clang_major__ >= 11) || (!defined(__clang__) && __GNUC__ >= 10)
#define TREELM_PANEL_BF16 1
// the AMX tiles: GCC 11 or clang 12 (their intrinsics), on Linux (the tile state is granted by
// arch_prctl)
#if defined(__linux__) && defined(__x86_64__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define TREELM_PANEL_AMX 1
#endif
#endif
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TREELM_PANEL_AVX2 1
#endif

namespace treelm {

namespace {

#ifdef TREELM_PANEL_AVX512
constexpr int64_t NR = 32;   // columns per panel: two 16-float zmm registers
constexpr int MR = 10;       // rows per register tile (batch 20 = 2 tiles; see the table above)
#else
constexpr int64_t NR = 16;   // columns per panel: two 8-float AVX2 registers
constexpr int MR = 5;        // rows per register tile (batch 20 = 4 tiles)
#endif

// C[0..R)[0..cols) (row stride ldc) = A[0..R)[0..K) (row stride lda) · panel (K × NR); with
// `next`, the next panel is fetched into L2 meanwhile, one line per line of the panel
template <int R>
inline void tile(int64_t K, const float* RESTRICT A, int64_t lda, const float* RESTRICT panel,
                 float* RESTRICT C, int64_t ldc, int64_t cols, const float* next) {
#if defined(TREELM_PANEL_AVX512)
  // as the AVX2 tile below: every loop over r fully unrolled, so that the accumulators stay in
  // registers
  __m512 lo[R], hi[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    lo[r] = _mm512_setzero_ps();
    hi[r] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    if (next) {               // a panel's row is two cache lines
      _mm_prefetch(reinterpret_cast<const char*>(next + k * NR), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + k * NR + 16), _MM_HINT_T1);
    }
    const __m512 b0 = _mm512_load_ps(panel + k * NR);
    const __m512 b1 = _mm512_load_ps(panel + k * NR + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
      lo[r] = _mm512_fmadd_ps(a, b0, lo[r]);
      hi[r] = _mm512_fmadd_ps(a, b1, hi[r]);
    }
  }
  // the last panel stores only its real columns (masked stores: nothing past a row's end)
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF)
                       : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : __mmask16(0);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(C + r * ldc, m0, lo[r]);
    _mm512_mask_storeu_ps(C + r * ldc + 16, m1, hi[r]);
  }
#elif defined(TREELM_PANEL_AVX2)
  // every loop over r fully unrolled, so that the accumulators stay in registers (with a loop
  // left, GCC kept the arrays in memory and stored all ten of them at every k)
  __m256 lo[R], hi[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    lo[r] = _mm256_setzero_ps();
    hi[r] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    if (next) _mm_prefetch(reinterpret_cast<const char*>(next + k * NR), _MM_HINT_T1);
    const __m256 b0 = _mm256_load_ps(panel + k * NR);
    const __m256 b1 = _mm256_load_ps(panel + k * NR + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
      lo[r] = _mm256_fmadd_ps(a, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(a, b1, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (cols == NR) {
      _mm256_storeu_ps(C + r * ldc, lo[r]);
      _mm256_storeu_ps(C + r * ldc + 8, hi[r]);
    } else {                      // the last panel: only its real columns
      alignas(32) float row[NR];
      _mm256_store_ps(row, lo[r]);
      _mm256_store_ps(row + 8, hi[r]);
      std::memcpy(C + r * ldc, row, cols * sizeof(float));
    }
  }
#else
  (void)next;
  float acc[R][NR] = {};
  for (int64_t k = 0; k < K; ++k)
    for (int r = 0; r < R; ++r) {
      const float a = A[r * lda + k];
      for (int64_t j = 0; j < NR; ++j) acc[r][j] += a * panel[k * NR + j];
    }
  for (int r = 0; r < R; ++r) std::memcpy(C + r * ldc, acc[r], cols * sizeof(float));
#endif
}

// `rows` (1..R) rows of a panel by a tile of exactly that many rows: a task of for_tasks below
// (R = MR), whose last tile of a panel fetches the `next` panel (or nothing) into L2, so that the
// next panel's first tile does not wait on memory: the first tile is the one that brings a panel
// in, the others read it from L2
template <int R>
inline void remainder_tile(int64_t rows, int64_t K, const float* A, int64_t lda,
                           const float* panel, float* C, int64_t ldc, int64_t cols,
                           const float* next) {
  if constexpr (R > 0) {
    if (rows == R)
      tile<R>(K, A, lda, panel, C, ldc, cols, next);
    else
      remainder_tile<R - 1>(rows, K, A, lda, panel, C, ldc, cols, next);
  }
}

#ifdef TREELM_PANEL_BF16
// The bfloat16 tiles are compiled for avx512_bf16 on their own (target attribute) and only run
// where the CPU has it (panel_bf16()): the rest of an AVX-512 build runs on every AVX-512 CPU.
#define TREELM_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// A[r][k], A[r][k+1] as one 32-bit word (the low half is k: vdpbf16ps's element 2i)
inline int32_t pair(const uint16_t* a) {
  int32_t v;
  std::memcpy(&v, a, sizeof v);
  return v;
}

// 16 float32 lanes rounded to bfloat16 as round_bf16 (common.h) rounds, stored under a mask
TREELM_BF16 inline void store_bf16(uint16_t* dst, __m512 v, __mmask16 m) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  _mm256_mask_storeu_epi16(dst, m, _mm512_cvtepi32_epi16(r));
}

// as tile() above: C[0..R)[0..cols) = A[0..R)[0..K) · panel, K/2 pairs (K2) and an odd K's last
// value alone
template <int R>
TREELM_BF16 void tile_bf16(int64_t K, const uint16_t* RESTRICT A, int64_t lda,
                           const uint16_t* RESTRICT panel, uint16_t* RESTRICT C, int64_t ldc,
                           int64_t cols, const uint16_t* next) {
  constexpr int64_t ROW = 2 * NR;   // bf16 values in a panel's row of pairs: two zmm registers
  __m512 lo[R], hi[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    lo[r] = _mm512_setzero_ps();
    hi[r] = _mm512_setzero_ps();
  }
  const int64_t K2 = K / 2;
  for (int64_t k = 0; k < K2; ++k) {
    if (next) {
      _mm_prefetch(reinterpret_cast<const char*>(next + k * ROW), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + k * ROW + 32), _MM_HINT_T1);
    }
    const __m512bh b0 = (__m512bh)_mm512_load_si512(panel + k * ROW);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(panel + k * ROW + 32);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair(A + r * lda + 2 * k));
      lo[r] = _mm512_dpbf16_ps(lo[r], a, b0);
      hi[r] = _mm512_dpbf16_ps(hi[r], a, b1);
    }
  }
  if (K % 2) {                      // the last value, its pair's other half zero (so is B's)
    const __m512bh b0 = (__m512bh)_mm512_load_si512(panel + K2 * ROW);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(panel + K2 * ROW + 32);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(A[r * lda + K - 1]);
      lo[r] = _mm512_dpbf16_ps(lo[r], a, b0);
      hi[r] = _mm512_dpbf16_ps(hi[r], a, b1);
    }
  }
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF)
                       : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : __mmask16(0);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    store_bf16(C + r * ldc, lo[r], m0);
    store_bf16(C + r * ldc + 16, hi[r], m1);
  }
}

template <int R>
TREELM_BF16 void remainder_tile_bf16(int64_t rows, int64_t K, const uint16_t* A, int64_t lda,
                                     const uint16_t* panel, uint16_t* C, int64_t ldc,
                                     int64_t cols, const uint16_t* next) {
  if constexpr (R > 0) {
    if (rows == R)
      tile_bf16<R>(K, A, lda, panel, C, ldc, cols, next);
    else
      remainder_tile_bf16<R - 1>(rows, K, A, lda, panel, C, ldc, cols, next);
  }
}
#endif

// rows of pairs per bfloat16 panel: ⌈K/2⌉ padded to a multiple of BF16_BLOCK (the header)
constexpr int64_t BF16_BLOCK = 16;
inline int64_t bf16_rows(int64_t K) {
  return ((K + 1) / 2 + BF16_BLOCK - 1) / BF16_BLOCK * BF16_BLOCK;
}

#ifdef TREELM_PANEL_AMX
#define TREELM_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

// Whether the CPU has AMX's bfloat16 products (CPUID 7.0: EDX bit 22) and Linux grants this
// process the tile state (5.16 on; the request fails where the CPU or the OS lacks the tiles),
// unless TREELM_PANEL_AMX=0; asked once, by panel_amx()
bool amx_granted() {
  const char* env = std::getenv("TREELM_PANEL_AMX");
  if (env != nullptr && std::string(env) == "0") return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  constexpr long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
  return ((d >> 22) & 1) &&
         syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

// The tiles' shapes for R rows of A (palette 1: 8 tiles of at most 16 rows × 64 bytes)
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// A thread's tiles for one run of tasks: configured for R rows when R changes, released at the
// end (other code on this thread, oneDNN's, loads its own configuration: none is assumed)
class AmxTiles {
 public:
  TREELM_AMX void shape(int64_t R) {
    if (R == rows_) return;
    TileConfig c;
    for (int t = 0; t < 3; ++t) c.rows[t] = static_cast<uint8_t>(R), c.colsb[t] = 64;
    for (int t = 3; t < 5; ++t) c.rows[t] = BF16_BLOCK, c.colsb[t] = 64;
    _tile_loadconfig(&c);
    rows_ = R;
  }
  TREELM_AMX ~AmxTiles() {
    if (rows_ > 0) _tile_release();
  }

 private:
  int64_t rows_ = 0;
};

// C[0..R)[0..cols) = A[0..R)[0..K) · panel through the tiles (the header); `tail`: A's last
// K mod 32 columns padded with zeros to 32, row stride 32 (or null where K is a multiple of 32)
TREELM_AMX void tile_amx(AmxTiles& tiles, int64_t R, int64_t K, const uint16_t* A, int64_t lda,
                         const uint16_t* tail, const uint16_t* panel, uint16_t* C, int64_t ldc,
                         int64_t cols, const uint16_t* next) {
  constexpr int64_t ROW = 2 * NR;                   // bf16 values in a panel's row of pairs
  constexpr int64_t BLOCK = BF16_BLOCK * ROW;       // one block of 32 k in a panel
  tiles.shape(R);
  _tile_zero(0);
  _tile_zero(1);
  const int64_t full = K / 32, blocks = (K + 31) / 32;
  for (int64_t kb = 0; kb < blocks; ++kb) {
    const uint16_t* b = panel + kb * BLOCK;
    if (next) {                                     // the block's 32 lines of the next panel
      for (int64_t l = 0; l < BLOCK; l += 32)
        _mm_prefetch(reinterpret_cast<const char*>(next + kb * BLOCK + l), _MM_HINT_T1);
    }
    if (kb < full)
      _tile_loadd(2, A + kb * 32, lda * 2);
    else
      _tile_loadd(2, tail, 64);
    _tile_loadd(3, b, ROW * 2);
    _tile_loadd(4, b + NR, ROW * 2);
    _tile_dpbf16ps(0, 2, 3);
    _tile_dpbf16ps(1, 2, 4);
  }
  alignas(64) float sums[16][NR];
  _tile_stored(0, &sums[0][0], NR * 4);
  _tile_stored(1, &sums[0][16], NR * 4);
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF)
                       : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : __mmask16(0);
  for (int64_t r = 0; r < R; ++r) {
    store_bf16(C + r * ldc, _mm512_load_ps(sums[r]), m0);
    store_bf16(C + r * ldc + 16, _mm512_load_ps(sums[r] + 16), m1);
  }
}

// rows [r0, r1) of A's last K mod 32 columns, padded with zeros to 32 (the last block's operand)
std::vector<uint16_t> amx_tail(const uint16_t* A, int64_t lda, int64_t K, int64_t r0,
                               int64_t r1) {
  const int64_t k0 = K / 32 * 32;
  if (k0 == K) return {};
  std::vector<uint16_t> tail((r1 - r0) * 32, 0);
  for (int64_t r = r0; r < r1; ++r)
    std::memcpy(tail.data() + (r - r0) * 32, A + r * lda + k0, (K - k0) * sizeof(uint16_t));
  return tail;
}
#endif

// The product's work as tasks of one panel by one register tile of rows (MR), in panel order,
// split between the threads in equal runs: `rows(p, r0, m, next)` computes rows [r0, r0 + m) of
// panel p, and fetches panel `next` (or none, -1) into L2 meanwhile where the thread's next task
// is that panel's first. Why tiles rather than whole panels: a product of few panels split
// unevenly (the tree config's backward, 13 panels, ran 7 against 6 on 2 threads); tasks of a
// tile differ by a tile at most, and a thread's run keeps a panel's tiles together, so each panel
// is still brought in once per thread.
// `State`: what a thread keeps for its run of tasks (the AMX tiles' configuration), made at the
// run's start and dropped at its end.
struct NoState {};

template <typename State = NoState, typename Rows>
void for_tasks(int64_t M, int64_t K, int64_t P, const Rows& rows) {
  const int64_t tiles = (M + MR - 1) / MR;
  // tasks per run: about a million multiply-adds at least, so that a batch-1 product of a small
  // layer runs on the calling thread alone
  const int64_t grain =
      std::max<int64_t>(1, 65536 / std::max<int64_t>(1, std::min<int64_t>(M, MR) * K));
  at::parallel_for(0, P * tiles, grain, [&](int64_t t0, int64_t t1) {
    State state;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / tiles, r0 = (t % tiles) * MR;
      const bool last = t % tiles == tiles - 1;
      rows(state, p, r0, std::min(MR, static_cast<int>(M - r0)),
           last && t + 1 < t1 ? p + 1 : -1);
    }
  });
}

}  // namespace

bool panel_bf16() {
#ifdef TREELM_PANEL_BF16
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

bool panel_amx() {
#ifdef TREELM_PANEL_AMX
  static const bool has = panel_bf16() && amx_granted();
  return has;
#else
  return false;
#endif
}

namespace {

// bfloat16 panels: pairs of k side by side, each panel padded to bf16_rows(K) rows (the layout
// in the header); the view of its first ⌈K/2⌉ rows
at::Tensor pack_bf16(const at::Tensor& b) {
  TORCH_CHECK(panel_bf16(), "panel_pack: bfloat16 panels need an AVX-512 build on a CPU with "
              "avx512_bf16 (panel_bf16() is false here)");
  const int64_t N = b.size(0), K = b.size(1), P = (N + NR - 1) / NR, K2 = bf16_rows(K);
  // empty, not zeros: each panel's own pass below zeroes what the pairs leave (the columns past
  // N, an odd K's last half-pair, the rows past ⌈K/2⌉), once instead of a fill of the whole
  // buffer before it (a pass over 1.4 MB for a tree layer's (1680 × 400) weight, at each step)
  at::Tensor out = at::empty({P, K2, 2 * NR}, b.options());
  const uint16_t* src = reinterpret_cast<const uint16_t*>(b.data_ptr<at::BFloat16>());
  const int64_t sn = b.stride(0), sk = b.stride(1), half = (K + 1) / 2;
  uint16_t* dst = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  at::parallel_for(0, P, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t cols = std::min(NR, N - p * NR);
      const uint16_t* rows = src + p * NR * sn;
      uint16_t* panel = dst + p * K2 * 2 * NR;
      if (cols < NR)
        for (int64_t r = 0; r < half; ++r)
          std::memset(panel + r * 2 * NR + 2 * cols, 0, 2 * (NR - cols) * sizeof(uint16_t));
      if (K % 2) std::memset(panel + (half - 1) * 2 * NR, 0, 2 * cols * sizeof(uint16_t));
      std::memset(panel + half * 2 * NR, 0, (K2 - half) * 2 * NR * sizeof(uint16_t));
      if (sn == 1) {
        // a transposed view (the backward's U): row pair k, k + 1 of the panel's columns lie
        // side by side in memory, interleaved into the panel's row: unit strides the compiler
        // vectorises, where the strided loop below moved one element at a time (0.26 ms a
        // tree layer at each step, 0.08 after: the pack_ms of train_time-zen4-pack-20261202.json)
        for (int64_t k = 0; k + 1 < K; k += 2) {
          const uint16_t* r0 = rows + k * sk;
          const uint16_t* r1 = r0 + sk;
          uint16_t* row = panel + (k / 2) * 2 * NR;
          for (int64_t j = 0; j < cols; ++j) {
            row[2 * j] = r0[j];
            row[2 * j + 1] = r1[j];
          }
        }
        if (K % 2) {              // the last k alone (its partner zeroed above)
          uint16_t* row = panel + (K / 2) * 2 * NR;
          for (int64_t j = 0; j < cols; ++j) row[2 * j] = rows[j + (K - 1) * sk];
        }
      } else if (sk == 1 && K % 2 == 0 && sn % 2 == 0 &&
                 reinterpret_cast<std::uintptr_t>(src) % alignof(uint32_t) == 0) {
        // rows of K contiguous (the forward's U): each pair k, k + 1 is one 32-bit word of
        // its row, so the panel is a transpose of 32-bit words
        const uint32_t* rows32 = reinterpret_cast<const uint32_t*>(rows);
        uint32_t* panel32 = reinterpret_cast<uint32_t*>(panel);
        const int64_t sn32 = sn / 2;
        for (int64_t j = 0; j < cols; ++j) {
          const uint32_t* r = rows32 + j * sn32;
          for (int64_t kk = 0; kk < half; ++kk) panel32[kk * NR + j] = r[kk];
        }
      } else {
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < cols; ++j)
            panel[(k / 2) * 2 * NR + 2 * j + k % 2] = rows[j * sn + k * sk];
      }
    }
  });
  return out.narrow(1, 0, (K + 1) / 2);
}

}  // namespace

at::Tensor panel_pack(const at::Tensor& b) {
  TORCH_CHECK(b.dim() == 2 && b.device().is_cpu() &&
                  (b.scalar_type() == at::kFloat || b.scalar_type() == at::kBFloat16),
              "panel_pack takes a 2-D float32 or bfloat16 CPU tensor (N, K)");
  if (b.scalar_type() == at::kBFloat16) return pack_bf16(b);
  const int64_t N = b.size(0), K = b.size(1), P = (N + NR - 1) / NR;
  at::Tensor out = at::empty({P, K, NR}, b.options());   // the columns past N zeroed below
  const float* src = b.data_ptr<float>();
  const int64_t sn = b.stride(0), sk = b.stride(1);   // any strides: a transposed view as well
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, P, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t cols = std::min(NR, N - p * NR);
      const float* rows = src + p * NR * sn;
      float* panel = dst + p * K * NR;
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t j = 0; j < cols; ++j) panel[k * NR + j] = rows[j * sn + k * sk];
        for (int64_t j = cols; j < NR; ++j) panel[k * NR + j] = 0.0f;
      }
    }
  });
  return out;
}

void panel_check(const at::Tensor& packed, int64_t K, int64_t n, at::ScalarType dtype) {
  // panels of another width come from a build for another instruction set (panel_columns());
  // the tiles' aligned loads need each panel on a 64-byte boundary (as panel_pack allocates it);
  // bfloat16 panels hold K/2 rows of pairs, bf16_rows(K) apart
  const bool bf16 = dtype == at::kBFloat16;
  const int64_t rows = bf16 ? (K + 1) / 2 : K, width = bf16 ? 2 * NR : NR;
  const bool laid_out = packed.dim() == 3 && packed.stride(2) == 1 &&
                        packed.stride(1) == width &&
                        packed.stride(0) == (bf16 ? bf16_rows(K) : K) * width;
  TORCH_CHECK(laid_out && packed.size(1) == rows && packed.size(2) == width &&
                  packed.scalar_type() == dtype &&
                  (n + NR - 1) / NR == packed.size(0) &&
                  reinterpret_cast<std::uintptr_t>(packed.data_ptr()) % 64 == 0,
              "panel_mm: the packed operand does not match (M, ", num(K), ") and N = ", num(n),
              " in panels of ", num(NR), " columns of the same dtype, laid out as panel_pack "
              "lays them and 64-byte aligned");
  TORCH_CHECK(!bf16 || panel_bf16(), "panel_mm: bfloat16 panels need avx512_bf16 (and an "
              "AVX-512 build by GCC 10 or clang 11 at least)");
}

namespace {

// Rows [r0, r1) of C (n columns, row stride n) = A (row stride lda) · the panels, on the calling
// thread: for each panel in order, the rows in as few tiles of at most MR rows as will do, of
// sizes that differ by one at most (32 rows: 4 tiles of 8, not 3 of 10 and one of 2, whose
// panel reads would feed 2 rows' multiply-adds each), the last tile fetching the next panel.
// Each element is the same sum in the same order as for_tasks' tiles make it: the same bits.
// `tile(rows, i, A's row i, panel, C's row i in the panel, columns, next)`.
template <typename E, typename Tile>
void rows_here(int64_t r0, int64_t r1, int64_t P, int64_t size, int64_t n, const E* A,
               int64_t lda, const E* B, E* C, const Tile& tile) {
  const int64_t m = r1 - r0, tiles = (m + MR - 1) / MR;
  for (int64_t p = 0; p < P; ++p) {
    const E* next = p + 1 < P ? B + (p + 1) * size : nullptr;
    for (int64_t q = 0, i = r0; q < tiles; ++q) {
      const int64_t rows = m / tiles + (q < m % tiles ? 1 : 0);
      tile(rows, i, A + i * lda, B + p * size, C + i * n + p * NR, std::min(NR, n - p * NR),
           q == tiles - 1 ? next : nullptr);
      i += rows;
    }
  }
}

}  // namespace

void panel_rows(const at::Tensor& packed, int64_t K, int64_t n, const float* A, int64_t lda,
                float* C, int64_t r0, int64_t r1) {
  rows_here(r0, r1, packed.size(0), K * NR, n, A, lda, packed.data_ptr<float>(), C,
            [&](int64_t m, int64_t, const float* a, const float* panel, float* c, int64_t cols,
                const float* next) {
              remainder_tile<MR>(m, K, a, lda, panel, c, n, cols, next);
            });
}

void panel_rows(const at::Tensor& packed, int64_t K, int64_t n, const at::BFloat16* A,
                int64_t lda, at::BFloat16* C, int64_t r0, int64_t r1) {
#ifdef TREELM_PANEL_BF16
  const uint16_t* a0 = reinterpret_cast<const uint16_t*>(A);
  const uint16_t* B = reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>());
  uint16_t* c0 = reinterpret_cast<uint16_t*>(C);
  const int64_t size = packed.stride(0);
#ifdef TREELM_PANEL_AMX
  if (panel_amx()) {
    AmxTiles tiles;
    const std::vector<uint16_t> tail = amx_tail(a0, lda, K, r0, r1);
    rows_here(r0, r1, packed.size(0), size, n, a0, lda, B, c0,
              [&](int64_t m, int64_t i, const uint16_t* a, const uint16_t* panel,
                  uint16_t* c, int64_t cols, const uint16_t* next) {
                const uint16_t* t = tail.empty() ? nullptr : tail.data() + (i - r0) * 32;
                tile_amx(tiles, m, K, a, lda, t, panel, c, n, cols, next);
              });
    return;
  }
#endif
  rows_here(r0, r1, packed.size(0), size, n, a0, lda, B, c0,
            [&](int64_t m, int64_t, const uint16_t* a, const uint16_t* panel, uint16_t* c,
                int64_t cols, const uint16_t* next) {
              remainder_tile_bf16<MR>(m, K, a, lda, panel, c, n, cols, next);
            });
#else
  (void)packed, (void)K, (void)n, (void)A, (void)lda, (void)C, (void)r0, (void)r1;
  TORCH_CHECK(false, "panel_mm: bfloat16 panels need an AVX-512 build (by GCC 10 or clang 11 "
              "at least)");
#endif
}

void panel_mm_out(const at::Tensor& a_, const at::Tensor& packed, int64_t n, at::Tensor& out) {
  const bool bf16 = a_.scalar_type() == at::kBFloat16;
  TORCH_CHECK(a_.dim() == 2 && (a_.scalar_type() == at::kFloat || bf16),
              "panel_mm takes float32 or bfloat16 (M, K)");
  const int64_t M = a_.size(0), K = a_.size(1), P = packed.size(0);
  // rows with contiguous k (a size-1 dimension's stride means nothing, and contiguous() keeps it)
  const at::Tensor a = K > 1 && a_.stride(1) != 1 ? a_.contiguous() : a_;
  panel_check(packed, K, n, a_.scalar_type());
  TORCH_CHECK(out.size(0) == M && out.size(1) == n && out.is_contiguous() &&
                  out.scalar_type() == a_.scalar_type(), "panel_mm: out");
  const int64_t lda = M > 1 ? a.stride(0) : K;
  if (bf16) {
#ifdef TREELM_PANEL_BF16
    const uint16_t* A = reinterpret_cast<const uint16_t*>(a.data_ptr<at::BFloat16>());
    const uint16_t* B = reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>());
    uint16_t* C = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
    const int64_t size = packed.stride(0);
#ifdef TREELM_PANEL_AMX
    if (panel_amx()) {
      const std::vector<uint16_t> tail = amx_tail(A, lda, K, 0, M);
      for_tasks<AmxTiles>(M, K, P, [&](AmxTiles& tiles, int64_t p, int64_t r0, int64_t m,
                                       int64_t next) {
        tile_amx(tiles, m, K, A + r0 * lda, lda, tail.empty() ? nullptr : tail.data() + r0 * 32,
                 B + p * size, C + r0 * n + p * NR, n, std::min(NR, n - p * NR),
                 next >= 0 ? B + next * size : nullptr);
      });
      return;
    }
#endif
    for_tasks(M, K, P, [&](NoState&, int64_t p, int64_t r0, int64_t m, int64_t next) {
      remainder_tile_bf16<MR>(m, K, A + r0 * lda, lda, B + p * size, C + r0 * n + p * NR, n,
                              std::min(NR, n - p * NR), next >= 0 ? B + next * size : nullptr);
    });
    return;
#else
    TORCH_CHECK(false, "panel_mm: bfloat16 panels need an AVX-512 build (by GCC 10 or clang 11 "
                "at least)");
#endif
  }
  const float* A = a.data_ptr<float>();
  const float* B = packed.data_ptr<float>();
  float* C = out.data_ptr<float>();
  for_tasks(M, K, P, [&](NoState&, int64_t p, int64_t r0, int64_t m, int64_t next) {
    remainder_tile<MR>(m, K, A + r0 * lda, lda, B + p * K * NR, C + r0 * n + p * NR, n,
                       std::min(NR, n - p * NR), next >= 0 ? B + next * K * NR : nullptr);
  });
}

at::Tensor panel_mm(const at::Tensor& a, const at::Tensor& packed, int64_t n) {
  at::Tensor out = at::empty({a.size(0), n}, a.options());
  panel_mm_out(a, packed, n, out);
  return out;
}

int64_t panel_columns() { return NR; }

void bind_panel_gemm(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("panel_columns", &panel_columns,
        "columns per panel of this build's panel_pack: 32 with AVX-512, 16 otherwise");
  m.def("panel_amx", &panel_amx,
        "whether the bfloat16 panels run on AMX tiles here (amx_bf16, granted by Linux; "
        "TREELM_PANEL_AMX=0 says no)");
  m.def("panel_bf16", &panel_bf16,
        "whether panel_pack and panel_mm take bfloat16 here (an AVX-512 build, avx512_bf16)");
  m.def("panel_pack", &panel_pack, "pack B (N, K) into panel_columns()-column panels",
        py::arg("b"), py::call_guard<py::gil_scoped_release>());
  m.def("panel_mm", &panel_mm, "a (M, K) times the packed B, transposed: (M, N)", py::arg("a"),
        py::arg("packed"), py::arg("n"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace treelm
