// A caching allocator for PyTorch's large CPU blocks (installed by treelm/kernels/cpu_cache.py for
// a training, see there): a block of at least MIN_BYTES is freed into a list of its size class
// and handed out again by the next request of that class, without a call to malloc.
//
// Size classes: n bytes rounded up to 2^k · (1 + j/4), j = 0 … 3, so a block is at most 25%
// larger than asked and a step's tensors, whose lengths change with variable BPTT, share a few
// classes. Smaller blocks go to the allocator this one stands in front of (glibc's tcache and
// small bins serve them in constant time).
//
// Why: with the heap kept (treelm/heap.py) glibc serves a training step's large
// blocks from its large bins, and finding a fit walks chunks whose headers lie in memory the step
// has not touched for a while, a cache miss each: on a 2-core Zen 5 perf found the main thread of
// a bf16 tree step in _int_malloc for a visible part of the step, serial time while the other
// core spins. A class's list is one lookup under a mutex.
//
// Kept blocks are not returned to the system, installed or not (a training's
// blocks are reused step after step; its peak is what it holds anyway); empty() frees them, and
// a failed allocation empties the cache once and retries before it reports the failure.

#include "common.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <mutex>
#include <unordered_map>

namespace treelm {
namespace {

constexpr size_t MIN_BYTES = size_t(1) << 16;

size_t size_class(size_t n) {
  const size_t k = 63 - static_cast<size_t>(__builtin_clzll(n - 1));  // 2^k < n <= 2^(k+1)
  const size_t step = (size_t(1) << k) / 4;
  return (n + step - 1) / step * step;
}

struct CachingCPUAllocator final : c10::Allocator {
  c10::Allocator* base = nullptr;  // the allocator in front of which this one stands
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> kept;  // size class -> free blocks
  std::unordered_map<void*, size_t> live;               // block handed out -> its class
  size_t kept_bytes = 0, hits = 0, misses = 0;

  c10::DataPtr allocate(size_t n) override {
    if (n < MIN_BYTES) return base->allocate(n);
    const size_t c = size_class(n);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> g(mu);
      auto it = kept.find(c);
      if (it != kept.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        kept_bytes -= c;
        ++hits;
      } else {
        ++misses;
      }
    }
    if (p == nullptr) {
      try {
        p = c10::alloc_cpu(c);
      } catch (const c10::Error&) {  // out of memory: give the kept blocks back, once
        empty();
        p = c10::alloc_cpu(c);
      }
    }
    {
      std::lock_guard<std::mutex> g(mu);
      live.emplace(p, c);
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  // raw_allocate's blocks (libraries' workspaces) come back through this, small ones too (they
  // are c10::alloc_cpu's, as the default allocator's are: give_back frees what is not kept here)
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  void give_back(void* p) {
    std::lock_guard<std::mutex> g(mu);
    auto it = live.find(p);
    if (it == live.end()) {  // a small block of the allocator behind (raw_deallocate)
      c10::free_cpu(p);
      return;
    }
    const size_t c = it->second;
    live.erase(it);
    kept[c].push_back(p);
    kept_bytes += c;
  }

  void empty() {
    std::lock_guard<std::mutex> g(mu);
    for (auto& [c, blocks] : kept) {
      for (void* p : blocks) c10::free_cpu(p);
      blocks.clear();
    }
    kept_bytes = 0;
  }

  static void release(void* p);
};

// One per process, never destroyed: tensors freed while the interpreter shuts down, after this
// library's statics would have been, still find it.
CachingCPUAllocator& cache = *new CachingCPUAllocator();

void CachingCPUAllocator::release(void* p) { cache.give_back(p); }

// Put the cache in front of PyTorch's CPU allocator; whether it is (now) PyTorch's.
bool install() {
  c10::Allocator* now = c10::GetCPUAllocator();
  if (now == &cache) return true;
  // only in front of PyTorch's own (give_back frees small blocks as that one does)
  if (now != c10::GetDefaultCPUAllocator()) return false;
  cache.base = now;
  c10::SetCPUAllocator(&cache, /*priority=*/1);
  return c10::GetCPUAllocator() == &cache;
}

// Give PyTorch back the allocator the cache stood in front of; blocks handed out meanwhile still
// come back to the cache (their deleter is its), which keeps them for a later install().
bool uninstall() {
  if (c10::GetCPUAllocator() != &cache) return true;
  c10::SetCPUAllocator(cache.base, /*priority=*/1);
  return c10::GetCPUAllocator() == cache.base;
}

// (kept bytes, blocks handed out, hits, misses)
std::vector<int64_t> stats() {
  std::lock_guard<std::mutex> g(cache.mu);
  return {static_cast<int64_t>(cache.kept_bytes), static_cast<int64_t>(cache.live.size()),
          static_cast<int64_t>(cache.hits), static_cast<int64_t>(cache.misses)};
}

}  // namespace

void bind_cpu_cache(pybind11::module_& m) {
  m.def("cpu_cache_install", &install,
        "put the caching allocator in front of PyTorch's CPU allocator; whether it is");
  m.def("cpu_cache_uninstall", &uninstall, "give PyTorch its own CPU allocator back");
  m.def("cpu_cache_installed", [] { return c10::GetCPUAllocator() == &cache; });
  m.def("cpu_cache_stats", &stats, "(kept bytes, live blocks, hits, misses)");
  m.def("cpu_cache_empty", [] { cache.empty(); }, "free every kept block");
  m.def("cpu_cache_size_class", &size_class, "the size class of n bytes (n >= 2)");
}

}  // namespace treelm
