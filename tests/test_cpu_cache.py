"""treelm.kernels.cpu_cache: the caching allocator of large CPU blocks. A freed block serves the
next request of its size class; classes are at most 25% above the request; small blocks and
library workspaces (raw_allocate) pass through; the numbers of a product do not change."""

from __future__ import annotations

import pytest
import torch

from treelm.kernels import build, cpu_cache

pytestmark = pytest.mark.skipif(not build.enabled() or build.load() is None,
                                reason="no C++ extension here")


@pytest.fixture(scope="module")
def ext():
    assert cpu_cache.install() and cpu_cache.installed()
    return build.load()


def test_size_classes_round_up_by_a_quarter_octave_at_most(ext) -> None:
    for n in [65536, 65537, 100_000, 3 << 20, (1 << 24) + 1, 123_456_789]:
        c = ext.cpu_cache_size_class(n)
        assert n <= c <= 1.25 * n
        assert ext.cpu_cache_size_class(c) == c            # a class is its own class
    assert ext.cpu_cache_size_class(1 << 20) == 1 << 20


def test_a_freed_block_serves_the_next_request_of_its_class(ext) -> None:
    a = torch.empty(300_000, dtype=torch.uint8)
    ptr = a.data_ptr()
    del a
    before = cpu_cache.stats()
    b = torch.empty(290_000, dtype=torch.uint8)            # the same class (2^18·1.25)
    after = cpu_cache.stats()
    assert b.data_ptr() == ptr and after["hits"] == before["hits"] + 1
    small = torch.empty(100, dtype=torch.uint8)           # below 64 KiB: not kept here
    del small
    assert cpu_cache.stats()["kept_bytes"] == after["kept_bytes"]


def test_products_and_workspaces_keep_their_numbers(ext) -> None:
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(300, 500, generator=g), torch.randn(500, 700, generator=g)
    ref = (a.double() @ b.double()).float()
    for _ in range(3):                                      # through freed and reused blocks
        torch.testing.assert_close(torch.addmm(torch.zeros(700), a, b), ref, rtol=1e-4,
                                   atol=1e-3)
    cpu_cache.empty()
    assert cpu_cache.stats()["kept_bytes"] == 0


def test_the_switch_takes_the_cache_out_and_puts_it_back(ext) -> None:
    held = torch.empty(200_000, dtype=torch.uint8)          # handed out by the cache
    cpu_cache.switch.on = False
    try:
        assert not cpu_cache.installed()
        before = cpu_cache.stats()
        plain = torch.empty(200_000, dtype=torch.uint8)     # PyTorch's own allocator's
        assert cpu_cache.stats()["hits"] + cpu_cache.stats()["misses"] == (
            before["hits"] + before["misses"])
        del held, plain                                     # the cache's block comes back to it
        assert cpu_cache.stats()["kept_bytes"] >= before["kept_bytes"] + 200_000
    finally:
        cpu_cache.switch.on = True
    assert cpu_cache.installed()
