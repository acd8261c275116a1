"""A caching allocator for PyTorch's large CPU blocks, in front of its own (``csrc/cpu_cache.cpp``):
a block of 64 KiB or more, once freed, waits in a list of its size class (the size rounded up
to 2^k·(1 + j/4)) for the next request of that class, which it serves without ``malloc``.

Why: a training step allocates and frees many large tensors, the same ones step
after step. With the heap kept (:mod:`treelm.heap`) glibc finds each in its large bins by
walking free chunks whose headers lie in memory the step has not touched lately, a cache miss
per chunk; on a 2-core Zen 5 ``perf`` found the main thread of a bf16 tree step in glibc's
``_int_malloc`` for a visible part of the step, serial time during which the other core waits.
A class's list is one lookup. The step with and without it, switched in one process:
``benchmarks/step_toggle.py --attr treelm.kernels.cpu_cache.switch.on`` (docs/training.md,
"Memory between steps", has the records).

What it costs: a block is up to 25% larger than asked, and kept blocks are not given back to
the system while the process lives (a training holds its peak at every step anyway);
:func:`empty` frees them, and a failed allocation empties the cache once before it fails.
:class:`~treelm.train.trainer.Trainer` installs it with the heap setting, and leaves both alone
where the user chose malloc's behaviour (:func:`treelm.heap.user_chose`, e.g.
``TREELM_HEAP=release``). Installed once per process, it stays; it changes no number. Without
the C++ extension there is none (:func:`install` says ``False``).
"""

from __future__ import annotations

from treelm.kernels.sequence import cxx_extension


def install() -> bool:
    """Put the cache in front of PyTorch's CPU allocator (once per process); whether it is."""
    ext = cxx_extension()
    return ext is not None and bool(ext.cpu_cache_install())


def uninstall() -> bool:
    """Give PyTorch its own CPU allocator back (blocks out now still return to the cache)."""
    ext = cxx_extension()
    return ext is None or bool(ext.cpu_cache_uninstall())


class Switch:
    """``switch.on``: whether the cache is installed; set it to install or uninstall
    (``benchmarks/step_toggle.py --attr treelm.kernels.cpu_cache.switch.on`` times a step both
    ways in one process)."""

    @property
    def on(self) -> bool:
        return installed()

    @on.setter
    def on(self, value: bool) -> None:
        if not (install() if value else uninstall()):
            raise RuntimeError("the CPU cache could not be " + ("installed" if value else
                                                                "uninstalled"))


switch = Switch()


def installed() -> bool:
    ext = cxx_extension()
    return ext is not None and bool(ext.cpu_cache_installed())


def stats() -> dict[str, int]:
    """Kept bytes, blocks handed out now, and requests served from the cache or not."""
    ext = cxx_extension()
    if ext is None:
        return {}
    kept, live, hits, misses = ext.cpu_cache_stats()
    return {"kept_bytes": kept, "live_blocks": live, "hits": hits, "misses": misses}


def empty() -> None:
    """Free every kept block (the blocks in use stay)."""
    ext = cxx_extension()
    if ext is not None:
        ext.cpu_cache_empty()
