"""The GEMM backend selection of :mod:`treelm.kernels.gemm`: every backend's product is right, a
shape is measured once per process, overrides are obeyed, unusable backends fall back to ``mm``.

No assertion depends on how fast anything ran: where the choice itself is tested, the measurement
is replaced by fixed figures."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from treelm.cells import GRU, LSTM, MRNN, Elman, Jordan
from treelm.kernels import build, gemm
from treelm.kernels.gemm import FixedMatmul, Measurement


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No measurement or override leaks in or out; ``$TREELM_GEMM`` unset."""
    monkeypatch.delenv(gemm.ENV_VAR, raising=False)
    gemm.clear_cache()
    gemm.set_backend(None)
    yield
    gemm.set_backend(None)
    gemm.clear_cache()


def _counting_measure(monkeypatch: pytest.MonkeyPatch,
                      candidates: list[tuple[str, ...]] | None = None) -> list[tuple[int, ...]]:
    """Make ``_measure`` record the (weight shape, batch, transpose) it is called with, and the
    backends it tries in ``candidates``; it still measures."""
    calls: list[tuple[int, ...]] = []
    real = gemm.choice._measure

    def measure(weight, batch, transpose, a_t, once, tried):
        calls.append((*weight.shape, batch, int(transpose)))
        if candidates is not None:
            candidates.append(tried)
        return real(weight, batch, transpose, a_t, once, tried)

    monkeypatch.setattr(gemm.choice, "_measure", measure)
    return calls


@pytest.mark.parametrize("backend", gemm.usable_backends(torch.float32))
@pytest.mark.parametrize("transpose", [False, True])
def test_every_backend_computes_the_product(backend: str, transpose: bool) -> None:
    torch.manual_seed(0)
    w = torch.randn(24, 16)
    B = 5
    a = torch.randn(B, 24 if transpose else 16)
    want = a @ (w if transpose else w.t())
    add = torch.randn_like(want)
    with gemm.use_backend(backend):
        fm = FixedMatmul(w, B, transpose=transpose, steps=10)
    assert fm.backend == backend
    torch.testing.assert_close(fm(a), want, atol=1e-5, rtol=1e-5)
    out = torch.empty_like(want)
    r = fm(a, add=add, out=out)
    assert r.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out, add + want, atol=1e-5, rtol=1e-5)
    fm(a, out=out)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", gemm.usable_backends(torch.float32))
@pytest.mark.parametrize("steps", [1, 10])
def test_a_bias_vector_is_added_by_the_product(backend: str, steps: int) -> None:
    """``add`` a vector (a layer's bias): oneDNN and MKL add it as they write the product, the
    others after; every way gives ``a Wᵀ + b``."""
    torch.manual_seed(4)
    w, b, a = torch.randn(40, 24), torch.randn(40), torch.randn(9, 24)
    with gemm.use_backend(backend):
        fm = FixedMatmul(w, 9, steps=steps)
    torch.testing.assert_close(fm(a, add=b), torch.addmm(b, a, w.t()), atol=1e-5, rtol=1e-5)


def check_panel_padding(ext: Any, dtype: torch.dtype) -> None:
    """``panel_pack`` writes every element of its panels, the padding as zeros (the columns past
    N, an odd K's last half-pair and the bfloat16 panels' rows past ⌈K/2⌉), in memory that held
    NaNs: its buffer is allocated uninitialised, so the zeros are its own. Checked against the
    layout built here element by element (``csrc/panel_gemm.cpp``'s header), over the whole
    allocation of each panel, packed from rows (odd N), from a transposed view (even N) and from
    rows of a wider matrix at an even and an odd offset (each of the packing's paths)."""
    from treelm.kernels import cpu_cache

    cpu_cache.install()          # a freed block serves the next request of its size: the NaNs
    nr, bf16 = ext.panel_columns(), dtype == torch.bfloat16
    gen = torch.Generator().manual_seed(3)
    for n, k in ((2 * nr + 5, 400), (nr, 33), (7, 1), (1680, 400), (400, 1680), (3 * nr - 1, 31)):
        w = torch.randn(n, k, generator=gen).to(dtype)
        p = -(-n // nr)
        rows = -(-((k + 1) // 2) // 16) * 16 if bf16 else k
        width = 2 * nr if bf16 else nr
        wide = torch.zeros(n, k + 6, dtype=dtype)
        wide[:, 2:k + 2] = w
        odd = torch.zeros(n, k + 3, dtype=dtype)
        odd[:, 1:k + 1] = w
        views = (w if n % 2 else w.t().contiguous().t(), wide[:, 2:k + 2], odd[:, 1:k + 1])
        for view in views:
            torch.full((p * rows * width + 64,), float("nan"), dtype=dtype)   # freed at once
            packed = ext.panel_pack(view)
            whole = torch.as_strided(packed, (p, rows, width), packed.stride())
            want = torch.zeros(p, rows, width, dtype=dtype)
            cols = torch.zeros(p * nr, k, dtype=dtype)
            cols[:n] = w
            if bf16:                    # pairs of k side by side: [k, k + 1] per column
                pad = torch.zeros(p * nr, 2 * rows, dtype=dtype)
                pad[:, :k] = cols
                want = pad.view(p, nr, rows, 2).permute(0, 2, 1, 3).reshape(p, rows, width)
            else:
                want = cols.view(p, nr, k).permute(0, 2, 1)
            assert torch.equal(whole, want), f"{n} x {k} {dtype}: panels differ from the layout"


def check_panel_kernel(ext: Any) -> None:
    """``csrc/panel_gemm.cpp`` of the loaded build ``ext`` against the same product in float64:
    every row count up to three tiles of the widest tile (10 rows × 32 with AVX-512, 5 × 16 with
    AVX2: every remainder M mod MR after zero, one and two full tiles), every last panel of
    1..NR-1 columns, K of one and of a few odd lengths, A as a transposed view and as rows
    with a longer stride, weights packed from transposed views. Also run in a subprocess for the
    AVX2 build (:func:`test_the_avx2_panel_kernel_in_its_own_process`)."""
    nr = ext.panel_columns()
    gen = torch.Generator().manual_seed(0)

    def check(m: int, k: int, n: int, layout: str, transposed: bool) -> None:
        w = (torch.randn(k, n, generator=gen).t() if transposed
             else torch.randn(n, k, generator=gen))
        if layout == "transposed":            # A a transposed view: its k is strided
            a = torch.randn(k, m, generator=gen).t()
        elif layout == "strided":             # rows of a wider matrix: lda > K
            a = torch.randn(m, k + 3, generator=gen)[:, 1:k + 1]
        else:
            a = torch.randn(m, k, generator=gen)
        packed = ext.panel_pack(w)
        assert tuple(packed.shape) == ((n + nr - 1) // nr, k, nr)
        got = ext.panel_mm(a, packed, n)
        want = (a.double() @ w.double().t()).float()
        where = f"{m}x{k}x{n}, A {layout}, W transposed {transposed}, {nr}-column panels"
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5,
                                   msg=lambda s, where=where: f"{where}: {s}")

    layouts = ("contiguous", "transposed", "strided")
    for m in range(1, 31):                    # row remainders, with full and partial panels
        for i, k in enumerate((1, 7, 33)):
            for n in (2 * nr, 2 * nr + 5):
                check(m, k, n, layouts[(m + i) % 3], transposed=(m + n) % 2 == 0)
    for n in range(1, 2 * nr + 1):            # every last panel, alone and after a full one
        for m in (3, 20, 23):
            check(m, 5, n, layouts[(m + n) % 3], transposed=n % 2 == 1)
    for m, k, n in ((20, 400, 1680), (64, 37, 200), (1, 1150, 97)):
        for layout in layouts:
            check(m, k, n, layout, transposed=layout == "strided")
    with pytest.raises(RuntimeError, match="does not match"):
        ext.panel_mm(torch.randn(2, 9), ext.panel_pack(torch.randn(nr, 8)), nr)
    other = 48 - nr                           # the other build's panels: 16 here, 32 there
    with pytest.raises(RuntimeError, match="does not match"):
        ext.panel_mm(torch.randn(2, 8), torch.zeros(1, 8, other), other)
    shifted = torch.zeros(8 * nr + 1)[1:].view(1, 8, nr)   # contiguous, not 64-byte aligned
    with pytest.raises(RuntimeError, match="aligned"):
        ext.panel_mm(torch.randn(2, 8), shifted, nr)
    check_panel_padding(ext, torch.float32)


def _bf16_panels() -> bool:
    ext = build.load() if build.enabled() else None
    return ext is not None and ext.panel_bf16()


def check_bf16_panel_kernel(ext: Any) -> None:
    """The bfloat16 panels of ``ext`` (``vdpbf16ps`` tiles, or AMX's where ``panel_amx()``)
    against the product of the same bfloat16 values in float64: within the float32 sum's error
    and the one rounding of the result to bfloat16, over every row remainder of the 10-row tile,
    every last panel, odd and even K (an odd K's last value has no partner) and K on either side
    of AMX's 32-k blocks, A contiguous, transposed and strided, weights packed from transposed
    views; a panel packed for another K refused."""
    nr = ext.panel_columns()
    gen = torch.Generator().manual_seed(0)

    def check(m: int, k: int, n: int, layout: str, transposed: bool) -> None:
        w = (torch.randn(k, n, generator=gen).t() if transposed
             else torch.randn(n, k, generator=gen)).to(torch.bfloat16)
        if layout == "transposed":            # k strided
            a = torch.randn(k, m, generator=gen).bfloat16().t()
        elif layout == "strided":             # rows of a wider matrix, at an odd offset
            a = torch.randn(m, k + 3, generator=gen).bfloat16()[:, 1:k + 1]
        else:
            a = torch.randn(m, k, generator=gen).bfloat16()
        packed = ext.panel_pack(w)
        assert tuple(packed.shape) == ((n + nr - 1) // nr, (k + 1) // 2, 2 * nr)
        # each panel padded to blocks of 16 rows of pairs (the AMX tiles' 32 k)
        assert packed.stride(0) == -(-((k + 1) // 2) // 16) * 16 * 2 * nr
        assert packed.dtype == torch.bfloat16
        got = ext.panel_mm(a, packed, n)
        assert got.dtype == torch.bfloat16 and got.shape == (m, n)
        want = a.double() @ w.double().t()
        sums = a.double().abs() @ w.double().abs().t()
        bound = 2.0 ** -8 * want.abs() + (k + 2) * 2.0 ** -23 * sums + 1e-30
        err = (got.double() - want).abs()
        assert (err <= bound).all(), (
            f"{m}x{k}x{n}, A {layout}, W transposed {transposed}: error "
            f"{(err / bound).max().item():.2f} of the bound")

    layouts = ("contiguous", "transposed", "strided")
    for m in range(1, 31):
        for i, k in enumerate((1, 2, 7, 34)):
            for n in (2 * nr, 2 * nr + 5):
                check(m, k, n, layouts[(m + i) % 3], transposed=(m + n) % 2 == 0)
    for n in range(1, 2 * nr + 1):
        for m in (3, 20, 23):
            check(m, 5 + n % 2, n, layouts[(m + n) % 3], transposed=n % 2 == 1)
    for m, k, n in ((20, 400, 1680), (20, 1680, 400), (64, 37, 200), (1, 1151, 97),
                    (16, 31, 40), (17, 32, 33), (11, 33, 64), (25, 64, 7), (20, 95, 32)):
        for layout in layouts:
            check(m, k, n, layout, transposed=layout == "strided")
    w = torch.randn(nr, 8).bfloat16()
    with pytest.raises(RuntimeError, match="does not match"):     # float32 A, bf16 panels
        ext.panel_mm(torch.randn(2, 8), ext.panel_pack(w), nr)
    with pytest.raises(RuntimeError, match="does not match"):     # panels for K = 9
        ext.panel_mm(torch.randn(2, 9).bfloat16(), ext.panel_pack(w), nr)
    check_panel_padding(ext, torch.bfloat16)


@pytest.mark.skipif(not _bf16_panels(),
                    reason="no bfloat16 panels here (an AVX-512 build on a CPU with avx512_bf16)")
def test_the_bf16_panel_kernel_against_float64() -> None:
    """The loaded build's bfloat16 panels (AMX's tiles where this CPU grants them), and the panel
    backend is usable for bfloat16 here."""
    assert "panel" in gemm.usable_backends(torch.bfloat16)
    check_bf16_panel_kernel(build.load())


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


@pytest.mark.skipif(not _bf16_panels() or not build.load().panel_amx(),
                    reason="no AMX tiles here (a CPU with amx_bf16 whose tile state Linux grants)")
def test_the_vdpbf16ps_tiles_where_amx_is_switched_off() -> None:
    """On an AMX CPU the bfloat16 panels run on its tiles; with ``TREELM_PANEL_AMX=0`` (in a
    process of its own: the choice is made once per process) on the ``vdpbf16ps`` tiles, which
    must hold to the same float64 bound; and where the tiles are on, ``/proc/cpuinfo`` names
    amx_tile and amx_bf16."""
    assert {"amx_bf16", "amx_tile"} <= _cpu_flags()
    _check_in_own_process("assert ext.panel_bf16() and not ext.panel_amx()",
                          "check_bf16_panel_kernel", {"TREELM_PANEL_AMX": "0"})


def test_panel_backend_for_bfloat16_exactly_where_the_cpu_has_it() -> None:
    """The panel backend offers bfloat16 products where the loaded build says it runs them
    (``panel_bf16()``), float32 wherever the extension loads; never float64."""
    ext = build.load() if build.enabled() else None
    if ext is None:
        pytest.skip("treelm's C++ extension is not loaded")
    assert ("panel" in gemm.usable_backends(torch.bfloat16)) == ext.panel_bf16()
    assert "panel" in gemm.usable_backends(torch.float32)
    assert "panel" not in gemm.usable_backends(torch.float64)
    if build._isa() != "AVX512":
        assert not ext.panel_bf16()


@pytest.mark.skipif("panel" not in gemm.usable_backends(torch.float32),
                    reason="treelm's C++ extension is not loaded")
def test_the_panel_kernel_against_float64() -> None:
    """The loaded build's panel kernel (:func:`check_panel_kernel`), whose panels are 32 columns
    wide exactly where it was built for AVX-512."""
    ext = build.load()
    assert ext.panel_columns() == (32 if build._isa() == "AVX512" else 16)
    check_panel_kernel(ext)


@pytest.mark.skipif(not build.enabled() or build._cpu_isa() not in ("AVX2", "AVX512")
                    or build._isa() == "AVX2",
                    reason="no AVX2 CPU, or the AVX2 build is the one loaded here")
def test_the_avx2_panel_kernel_in_its_own_process() -> None:
    """The AVX2 build (5 × 16 tiles) on an AVX-512 CPU, as ``TREELM_CXX_ISA=avx2`` loads it: in
    a process of its own, since one process loads one build (compiled there first where the
    cache lacks it)."""
    _check_in_own_process("assert ext.panel_columns() == 16, ext.panel_columns()",
                          "check_panel_kernel", {build.ISA_ENV: "avx2"})


def _check_in_own_process(condition: str, check: str, env: dict[str, str]) -> None:
    """This module's ``check`` on the extension a fresh process loads under ``env`` (a build or a
    kernel is chosen once per process), after ``condition`` holds of that ``ext``."""
    code = (f"import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('t', {str(Path(__file__))!r})\n"
            f"t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)\n"
            f"from treelm.kernels import build\n"
            f"ext = build.load()\n"
            f"assert ext is not None, build.unavailable_reason()\n"
            f"{condition}\n"
            f"t.{check}(ext)\n"
            f"print('panels checked')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env, "OMP_NUM_THREADS": "2"}, timeout=900)
    assert done.returncode == 0 and "panels checked" in done.stdout, done.stderr[-3000:]


def test_panel_packing_is_measured_and_single_products_never_pack() -> None:
    """The panel backend's packing counts in its cost like MKL's; a single product (an input
    projection, a weight gradient) never packs, so it never runs on panels unless forced."""
    if "panel" not in gemm.usable_backends(torch.float32):
        pytest.skip("treelm's C++ extension is not loaded")
    w = torch.randn(48, 40)
    gemm.clear_decisions()
    with gemm.use_backend("auto"):
        FixedMatmul(w, 4, steps=6)
        gemm.matmul(torch.randn(300, 48), w)
    loop, single = gemm.decisions()
    assert loop["steps"] == 6 and "panel" in loop["pack_ms"] and "panel" in loop["call_ms"]
    assert single["steps"] == 1 and "panel" not in single.get("call_ms", {})


def test_a_shape_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    if len(gemm.usable_backends(torch.float32)) < 2:
        pytest.skip("one GEMM backend only: nothing is measured")
    calls = _counting_measure(monkeypatch)
    w = torch.randn(40, 12)
    first = FixedMatmul(w, 4, steps=7)
    again = FixedMatmul(torch.randn(40, 12), 4, steps=7)          # same shape, other values
    assert calls == [(40, 12, 4, 0)]
    assert again.backend == first.backend
    FixedMatmul(w, 4, steps=30)                    # another loop length: same measurement
    assert len(calls) == 1
    FixedMatmul(w, 4, transpose=True, steps=7)     # a·W: another product
    FixedMatmul(w, 3, steps=7)                     # another batch
    FixedMatmul(w, 4, steps=1)                     # a single product: unpacked candidates
    FixedMatmul(w, 4, steps=1)
    assert calls == [(40, 12, 4, 0), (40, 12, 4, 1), (40, 12, 3, 0), (40, 12, 4, 0)]
    assert {r["how"] for r in gemm.decisions()} == {"measured"}
    gemm.clear_cache()
    FixedMatmul(w, 4, steps=7)
    assert len(calls) == 5


def test_measuring_leaves_the_global_rng_alone() -> None:
    """A measuring run must draw the same dropout masks as one that found the choice cached."""
    w = torch.randn(48, 24)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    FixedMatmul(w, 4, steps=9)
    FixedMatmul(w, 4, transpose=True, steps=9)
    torch.testing.assert_close(torch.rand(3), expected, atol=0, rtol=0)


def test_thread_count_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    if len(gemm.usable_backends(torch.float32)) < 2:
        pytest.skip("one GEMM backend only: nothing is measured")
    calls = _counting_measure(monkeypatch)
    w = torch.randn(30, 10)
    threads = torch.get_num_threads()
    FixedMatmul(w, 2, steps=5)
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        FixedMatmul(w, 2, steps=5)
    finally:
        torch.set_num_threads(threads)
    assert len(calls) == 2


@pytest.mark.parametrize("backend", gemm.BACKENDS)
def test_override_is_obeyed_and_not_measured(backend: str, monkeypatch) -> None:
    calls = _counting_measure(monkeypatch)
    w = torch.randn(20, 8)
    expect = backend if backend in gemm.usable_backends(w.dtype) else "mm"
    with gemm.use_backend(backend):
        assert gemm.requested_backend() == backend
        assert FixedMatmul(w, 3, steps=4).backend == expect
    assert gemm.requested_backend() == "auto"
    monkeypatch.setenv(gemm.ENV_VAR, backend)
    assert FixedMatmul(w, 3, steps=4).backend == expect
    assert calls == []
    (row,) = [r for r in gemm.decisions() if r["requested"] == backend]
    assert row["how"] == ("forced" if expect == backend else "fallback")


def test_set_backend_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(gemm.ENV_VAR, "onednn")
    assert gemm.requested_backend() == "onednn"
    gemm.set_backend("mm")
    assert gemm.requested_backend() == "mm"
    with gemm.use_backend("auto"):
        assert gemm.requested_backend() == "auto"
    assert gemm.requested_backend() == "mm"
    gemm.set_backend(None)
    assert gemm.requested_backend() == "onednn"


def test_unknown_backend_names_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown GEMM backend"):
        gemm.set_backend("blas")
    monkeypatch.setenv(gemm.ENV_VAR, "cublas")
    with pytest.raises(ValueError, match="TREELM_GEMM"):
        FixedMatmul(torch.randn(4, 4), 2)


@pytest.mark.parametrize("missing", ["mkl", "onednn", "panel"])
def test_unavailable_backend_falls_back(missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build without the ops: forcing the backend gives ``mm``; auto never tries it."""
    monkeypatch.setitem(gemm._AVAILABLE, missing, False)
    assert missing not in gemm.available_backends()
    w = torch.randn(16, 8)
    with gemm.use_backend(missing):
        fm = FixedMatmul(w, 2, steps=3)
    assert fm.backend == "mm"
    assert gemm.decisions()[-1]["how"] == "fallback"
    a = torch.randn(2, 8)
    torch.testing.assert_close(fm(a), a @ w.t())
    tried: list[tuple[str, ...]] = []
    _counting_measure(monkeypatch, tried)
    assert FixedMatmul(w, 2, steps=3).backend != missing
    assert all(missing not in c for c in tried)


def test_onednn_switched_off_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    if "onednn" not in gemm.usable_backends(torch.float32):
        pytest.skip("no oneDNN here")
    w = torch.randn(64, 32)
    FixedMatmul(w, 8, steps=20)                     # measured with oneDNN a candidate
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    assert "onednn" not in gemm.usable_backends(torch.float32)
    assert FixedMatmul(w, 8, steps=20).backend != "onednn"
    with gemm.use_backend("onednn"):
        assert FixedMatmul(w, 8, steps=20).backend == "mm"


def test_backend_failing_at_packing_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend whose packing raises (a dtype or CPU it cannot serve) is skipped when measuring
    and replaced by ``mm`` when forced."""
    usable = gemm.usable_backends(torch.float32)
    packed = [b for b in usable if b != "mm"]
    if not packed:
        pytest.skip("no packed GEMM backend in this build")
    real_prepare = gemm.backends._prepare

    def prepare(backend, weight, batch, transpose, once):
        if backend == packed[0]:
            raise RuntimeError("cannot pack here")
        return real_prepare(backend, weight, batch, transpose, once)

    monkeypatch.setattr(gemm.backends, "_prepare", prepare)
    w = torch.randn(32, 16)
    fm = FixedMatmul(w, 4, steps=10)
    assert fm.backend != packed[0]
    (row,) = gemm.decisions()
    assert packed[0] in row["failed"] and packed[0] not in row["call_ms"]
    with gemm.use_backend(packed[0]):
        fm = FixedMatmul(w, 4, steps=10)
    assert fm.backend == "mm" and gemm.decisions()[-1]["how"] == "fallback"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64])
def test_dtypes_without_packed_backends_use_mm(dtype: torch.dtype, monkeypatch) -> None:
    calls = _counting_measure(monkeypatch)
    w = torch.ones(6, 4, dtype=dtype)
    a = torch.ones(3, 4, dtype=dtype)
    for forced in ("auto", "mkl"):
        with gemm.use_backend(forced):
            fm = FixedMatmul(w, 3, steps=5)
        assert fm.backend == "mm"
        if dtype != torch.float16:              # half GEMMs on CPU: not every build has them
            torch.testing.assert_close(fm(a), a @ w.t())
    assert calls == []
    assert [r["how"] for r in gemm.decisions()] == ["only", "fallback"]


def test_non_cpu_tensors_use_mm() -> None:
    assert gemm.usable_backends(torch.float32, "meta") == ("mm",)
    w = torch.empty(6, 4, device="meta")
    with gemm.use_backend("onednn"):
        assert FixedMatmul(w, 3).backend == "mm"
    assert FixedMatmul(w, 3).backend == "mm"
    assert FixedMatmul(w, 3)(torch.empty(3, 4, device="meta")).shape == (3, 6)


def test_choice_weighs_packing_against_steps_and_prefers_the_simpler_on_a_tie() -> None:
    m = Measurement(call_ms={"mm": 2.5, "mkl": 3.0, "onednn": 1.2},
                    pack_ms={"mkl": 8.0, "onednn": 3.0})
    assert m.best(70) == "onednn"             # 87 ms against 175 ms
    assert m.best(1) == "mm"                  # 2.5 ms against 4.2 ms: packing does not pay
    tie = Measurement(call_ms={"mm": 1.0, "mkl": 0.97, "onednn": 0.96},
                      pack_ms={"mkl": 0.0, "onednn": 0.0})
    assert tie.best(10) == "mm"               # within the margin: the first in BACKENDS order
    clear = Measurement(call_ms={"mm": 1.0, "mkl": 0.5, "onednn": 0.49},
                        pack_ms={"mkl": 0.0, "onednn": 0.0})
    assert clear.best(10) == "mkl"            # onednn is not more than 5% cheaper than mkl
    # 7% cheaper: taken in a loop (margin 5%), not for a single product (margin 10%)
    seven = Measurement(call_ms={"mm": 1.0, "onednn": 0.93})
    assert seven.best(10) == "onednn" and seven.best(1) == "mm"


def test_decision_is_logged_once_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    w = torch.randn(20, 10)
    with caplog.at_level(logging.DEBUG, logger="treelm.kernels.gemm"):
        FixedMatmul(w, 2, steps=6)
        FixedMatmul(w, 2, steps=6)
    msgs = [r.getMessage() for r in caplog.records if r.name == "treelm.kernels.gemm"]
    assert len(msgs) == 1 and "(2×10)·(10×20)" in msgs[0] and "6 steps" in msgs[0]
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


def test_decisions_are_json_ready() -> None:
    import json

    FixedMatmul(torch.randn(20, 10), 2, steps=6)
    with gemm.use_backend("mm"):
        FixedMatmul(torch.randn(20, 10), 2, transpose=True, steps=6)
    rows = json.loads(json.dumps(gemm.decisions()))
    assert [r["product"] for r in rows] == ["(2x10)·(10x20)", "(2x20)·(20x10)"]
    assert rows[1]["backend"] == "mm" and rows[1]["how"] == "forced"
    gemm.clear_decisions()
    assert gemm.decisions() == []


# ------------------------------------------------------------- gemm.linear inside a time loop

@pytest.mark.parametrize("backend", gemm.usable_backends(torch.float32))
@pytest.mark.parametrize("with_bias", [False, True])
def test_loop_linear_equals_f_linear(backend: str, with_bias: bool) -> None:
    """Values and all gradients as ``F.linear``'s over a few steps, with a non-leaf weight (a
    DropConnect copy) and the stride-0 gradient a plain ``sum`` sends back."""
    torch.manual_seed(0)
    T, B, K, N = 4, 3, 12, 20

    def run(use_gemm: bool) -> list[torch.Tensor]:
        torch.manual_seed(1)
        w = (torch.randn(N, K) * 0.3).requires_grad_()
        b = torch.randn(N, requires_grad=True) if with_bias else None
        h0 = torch.randn(B, K, requires_grad=True)
        dropped = torch.nn.functional.dropout(w, 0.3, True)
        lin = gemm.linear if use_gemm else torch.nn.functional.linear
        h, outs = h0, []
        with gemm.use_backend(backend):
            with gemm.loop(B, T):
                for _ in range(T):
                    y = lin(h, dropped, b)
                    outs.append(y)
                    h = torch.tanh(y[:, :K])
            sum(o.sum() for o in outs).backward()
        grads = [h0.grad, w.grad] + ([b.grad] if with_bias else [])
        return [torch.stack(outs).detach(), *grads]

    gemm.clear_decisions()
    got = run(True)
    assert {d["backend"] for d in gemm.decisions()} == {backend}
    for u, v in zip(run(False), got):
        torch.testing.assert_close(u, v, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", ["mm", "onednn"])
def test_single_matmul_into_out_with_transposed_operands(backend: str) -> None:
    """``matmul(a, b, out=)`` (the output layer's products): a @ b written into ``out``, for ``a``
    and ``b`` as they come (a transposed view: a weight gradient's ``Gᵀ h``), against float64."""
    if backend not in gemm.usable_backends(torch.float32):
        pytest.skip(f"{backend} is not in this PyTorch build")
    torch.manual_seed(5)
    g, h, w = torch.randn(37, 29), torch.randn(37, 11), torch.randn(29, 11)
    for a, b in [(g.t(), h), (g, w), (h, w.t())]:
        want = (a.double() @ b.double()).float()
        out = torch.full_like(want, float("nan"))
        with gemm.use_backend(backend):
            r = gemm.matmul(a, b, out=out)
            plain = gemm.matmul(a, b)
        assert r.data_ptr() == out.data_ptr()
        torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(plain, want, atol=1e-4, rtol=1e-5)


def test_output_layers_float32_products_go_through_the_gemm_choice() -> None:
    """The adaptive softmax's float32 loss takes its products from :mod:`treelm.kernels.gemm`
    (where oneDNN beats ``torch.mm``, as on an AMD CPU with AVX-512, they run there), and under
    bfloat16 autocast it leaves them to autocast's ``torch.mm`` and ``F.linear``."""
    from treelm.nn.adaptive_softmax import AdaptiveSoftmax

    torch.manual_seed(6)
    layer = AdaptiveSoftmax(3000, 64, [300], 4.0)       # head 2,100 × 64 × 301: 40M MACs
    h, y = torch.randn(2100, 64, requires_grad=True), torch.randint(0, 3000, (2100,))
    gemm.clear_decisions()
    with gemm.use_backend("mm"):
        layer.loss(h, y).backward()
    products = {r["product"] for r in gemm.decisions()}
    # the head's three (forward, δh, δW) and the tail's E·R (2,700 × 64 × 16 = 2.8M) not
    assert {"(4096x64)·(64x301)", "(4096x512)·(512x64)", "(512x4096)·(4096x64)"} <= products, \
        products
    gemm.clear_decisions()
    with torch.autocast("cpu", torch.bfloat16):
        layer.loss(h, y)
    layer.loss(h[:40].detach(), y[:40])                 # small: torch.mm's, not measured
    assert gemm.decisions() == []


@pytest.mark.parametrize("backend", gemm.usable_backends(torch.float32))
def test_linear_outside_a_loop_is_a_single_product(backend: str) -> None:
    """Outside a loop, or off the loop's batch, ``linear`` makes single products (``steps`` 1),
    over all leading dimensions of the input, with ``F.linear``'s values and gradients."""
    torch.manual_seed(3)
    w = torch.randn(6, 4, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    cases = [torch.randn(3, 4), torch.randn(2, 5, 4)]
    for a in cases:
        a.requires_grad_()
        gemm.clear_decisions()
        with gemm.use_backend(backend):
            with gemm.loop(7, 10):                  # not this input's batch
                y = gemm.linear(a, w, b)
            y.square().sum().backward()
        got = [y.detach(), a.grad, w.grad, b.grad]
        rows = gemm.decisions()
        assert rows and {r["steps"] for r in rows} == {1}
        assert {r["backend"] for r in rows} == {backend}
        for t in (a, w, b):
            t.grad = None
        y = torch.nn.functional.linear(a, w, b)
        y.square().sum().backward()
        for u, v in zip([y.detach(), a.grad, w.grad, b.grad], got):
            torch.testing.assert_close(u, v, atol=1e-5, rtol=1e-5)
        for t in (a, w, b):
            t.grad = None


@pytest.mark.parametrize("backend", gemm.usable_backends(torch.float32))
def test_loop_linear_higher_derivatives(backend: str) -> None:
    """``create_graph``: the backward stays differentiable, as through ``F.linear``."""
    def hessian_vector(use_gemm: bool) -> torch.Tensor:
        torch.manual_seed(2)
        w = torch.randn(8, 8, requires_grad=True)
        a = torch.randn(3, 8, requires_grad=True)
        lin = gemm.linear if use_gemm else torch.nn.functional.linear
        with gemm.loop(3, 2), gemm.use_backend(backend):
            y = torch.tanh(lin(torch.tanh(lin(a, w)), w))
        (ga,) = torch.autograd.grad(y.square().sum(), a, create_graph=True)
        (hv,) = torch.autograd.grad(ga.sum(), w)
        return hv

    torch.testing.assert_close(hessian_vector(True), hessian_vector(False), atol=1e-5,
                               rtol=1e-5)


def test_loop_linear_gradcheck() -> None:
    """float64 is ``F.linear`` itself; float32 under a packed backend is checked above."""
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    with gemm.loop(3, 4):
        assert torch.autograd.gradcheck(gemm.linear, (a, w, b))


LOOP_CELLS = {
    "jordan": lambda: Jordan(6, 24),
    "mrnn": lambda: MRNN(6, 24, factors=16),
    "lstm-peephole": lambda: LSTM(6, 24, peephole=True),
    "lstm-reference": lambda: LSTM(6, 24, impl="reference"),
    "elman-linear": lambda: Elman(6, 24, nonlinearity="linear"),
    "gru-reference": lambda: GRU(6, 24, impl="reference"),
}


@pytest.mark.parametrize("backend", [b for b in gemm.usable_backends(torch.float32)
                                     if b != "mm"])
@pytest.mark.parametrize("name", sorted(LOOP_CELLS))
def test_loop_cells_same_under_every_backend(name: str, backend: str) -> None:
    """The cells whose time loop runs its products through ``gemm.linear``: output, state and
    every gradient under a packed backend equal the plain-``mm`` run (with DropConnect)."""
    def run(forced: str) -> list[torch.Tensor]:
        torch.manual_seed(0)
        cell = LOOP_CELLS[name]()
        x = torch.randn(5, 4, 6, requires_grad=True)
        torch.manual_seed(1)
        weights = {k: torch.nn.functional.dropout(v, 0.3, True)
                   for k, v in cell.recurrent().items()}
        with gemm.use_backend(forced):
            out, state, _ = cell(x, None, weights)
            (out.square().sum() + sum(s.sum() for s in state)).backward()
        return [out.detach(), *(s.detach() for s in state), x.grad,
                *(p.grad for p in cell.parameters())]

    reference = run("mm")
    gemm.clear_decisions()
    got = run(backend)
    assert {d["backend"] for d in gemm.decisions()} == {backend}
    assert len(got) == len(reference)
    for u, v in zip(reference, got):
        torch.testing.assert_close(u, v, atol=1e-5, rtol=1e-5)


def test_measurements_restore_and_pin_the_choice():
    """A checkpoint carries the measurements; restored in a fresh cache they give the same
    backend without measuring again (a resumed run rounds as the uninterrupted one)."""
    import torch

    from treelm.kernels import gemm

    gemm.clear_cache()
    w = torch.randn(88, 20)
    with gemm.use_backend("auto"):
        gemm.FixedMatmul(w, batch=4, steps=35)
    saved = gemm.measurements()
    assert saved and all("call_ms" in r for r in saved)
    before = [d["backend"] for d in gemm.decisions()]
    gemm.clear_cache()
    gemm.restore_measurements(saved)
    # a rigged measurement shows that the restored one is used, not a new timing
    for row in saved:
        row["call_ms"] = {b: (0.001 if b == "mm" else 1e6) for b in row["call_ms"]}
    gemm.clear_cache()
    gemm.restore_measurements(saved)
    with gemm.use_backend("auto"):
        gemm.FixedMatmul(w, batch=4, steps=35)
    assert [d["backend"] for d in gemm.decisions()] == ["mm"] and before
    gemm.clear_cache()


def test_single_products_of_one_size_class_share_a_measurement(monkeypatch):
    """A variable-length batch: single products over 33, 60 and 64 rows (input projections over
    T·B rows, weight gradients over T·B terms) are measured once per power-of-two size class, not
    once per length; a loop's products keep their exact shapes."""
    if len(gemm.usable_backends(torch.float32)) < 2:
        pytest.skip("one backend: nothing is measured")
    calls = _counting_measure(monkeypatch)
    w = torch.randn(96, 48)
    for rows in (33, 60, 64):                       # one class: 64
        a = torch.randn(rows, 48)
        torch.testing.assert_close(FixedMatmul(w, rows, steps=1)(a), a @ w.t())
    assert len(calls) == 1
    FixedMatmul(w, 65, steps=1)                     # the next class
    assert len(calls) == 2
    FixedMatmul(w, 33, steps=20)
    FixedMatmul(w, 34, steps=20)                    # loops: exact shapes
    assert len(calls) == 4
    assert [gemm.choice.size_class(n) for n in (1, 2, 33, 64, 65)] == [1, 2, 64, 64, 128]


@pytest.mark.parametrize("shape", [(7, 5, 24), (3, 40), (1, 1, 24)])
def test_cast_linear_is_autocasts_linear_to_the_bit(shape: tuple[int, ...]) -> None:
    """``cast_linear`` (oneDNN's linear adding the bias as it writes, where oneDNN takes
    bfloat16) gives autocast's ``F.linear`` bit for bit, over any leading dimensions, and stays
    out of autograd; oneDNN switched off, it is autocast's ``F.linear`` itself."""
    torch.manual_seed(4)
    a = torch.randn(*shape[:-1], 24)
    w, b = torch.randn(shape[-1] * 2 + 1, 24, requires_grad=True), torch.randn(shape[-1] * 2 + 1)
    with torch.autocast("cpu", torch.bfloat16):
        want = torch.nn.functional.linear(a, w, b)
    got = gemm.cast_linear(a, w, b, torch.bfloat16)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape and not got.requires_grad
    assert torch.equal(got.view(torch.int16), want.detach().view(torch.int16))
    with torch.backends.mkldnn.flags(enabled=False):
        off = gemm.cast_linear(a, w.detach(), b, torch.bfloat16)
    assert off.dtype == torch.bfloat16 and torch.equal(off.float(), want.detach().float())
