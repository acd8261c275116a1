"""Builds and loads treelm's C++ extension: the time loops of the fused ON-LSTM
(``csrc/onlstm.cpp``, called by :mod:`treelm.kernels.onlstm_cxx`) and of the LSTM under bfloat16
autocast (``csrc/lstm.cpp``, :mod:`treelm.kernels.lstm_cxx`), the output layer's softmax
cross-entropy by rows (``csrc/softmax_ce.cpp``, :mod:`treelm.kernels.softmax_ce`) and dropout with
a hashed mask (``csrc/hash_dropout.cpp``, :mod:`treelm.kernels.hash_dropout`), with what they
share in ``csrc/common.h`` and the Python bindings in ``csrc/module.cpp``.

    python -m treelm.kernels.build      # compile now (``make setup`` does) and say what was done

Compiled once per machine with :func:`torch.utils.cpp_extension.load` (ninja and the system C++
compiler) into ``$TORCH_EXTENSIONS_DIR`` (default: the user's cache,
``~/.cache/torch_extensions``), in a folder named after the instruction set it is compiled for
and a hash of its source, flags, Python and PyTorch versions: an edited source, a new PyTorch or
another machine sharing the cache never loads a stale or foreign binary. Later processes import
the built file directly (no compiler run); a process that finds none builds it then, once.

Flags: ``-O3``; ``-fopenmp`` (``at::parallel_for`` is OpenMP in PyTorch's CPU builds; the
extension links the ``libgomp.so.1`` PyTorch has already loaded, so both share one thread pool
and ``torch.set_num_threads``); ``-fno-trapping-math`` (the gate loops' clamps are comparisons
the vectoriser may only turn into blends when floating-point exceptions need not be kept;
nothing here reads them) and ``-ffp-contract=fast`` (multiply-adds fused); plus the vector
instruction set PyTorch's own kernels use on this CPU (``torch.backends.cpu.get_cpu_capability()``:
``AVX2`` → ``-mavx2 -mfma``, ``AVX512`` → those and ``-mavx512f -mavx512bw -mavx512dq
-mavx512vl``, otherwise the compiler's baseline). That is chosen by what the CPU can do, never by
its vendor, and it is not ``-march=native``: a binary compiled for exactly the instruction sets
named in its folder runs on every CPU, Intel or AMD, that has them, whereas ``-march=native``
could use more than the folder name says (and crash on another machine sharing the cache).

Another instruction set, to measure one class of CPU on another (the AVX2 path on an AVX-512
machine): ``TREELM_CXX_ISA=avx2`` (or ``avx512``, ``default``; empty or ``auto``: the CPU's, as
above) builds and loads the loops for that set, in their own folder. A set this CPU does not run
is refused (its binary would die of an illegal instruction): :func:`load` says why and the Python
paths run. PyTorch's ``ATEN_CPU_CAPABILITY=avx2`` lowers the capability read above, so it alone
gives the AVX2 loops too; ``benchmarks/cells.py --isa avx2`` sets both, with MKL's and oneDNN's
limits (``MKL_ENABLE_INSTRUCTIONS=AVX2``, ``ONEDNN_MAX_CPU_ISA=AVX2``): the AVX2 proxy, named so
in its record.

``TREELM_CXX=0`` switches the extension off (the Python fused path runs). If it cannot be built
or loaded (no compiler, a failed build), :func:`load` says so in one line on stderr, once per
process, and returns ``None``; callers then take the Python path. (A process that has to build
it first also says so, in one line, before the compiler's minute.)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType

import torch

ENV_VAR = "TREELM_CXX"
#: the instruction set to build the loops for instead of the CPU's (lower only; see above)
ISA_ENV = "TREELM_CXX_ISA"
CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = sorted(CSRC.glob("*.cpp"))
HEADERS = sorted(CSRC.glob("*.h"))
_ISA_FLAGS = {
    "AVX2": ["-mavx2", "-mfma"],
    "AVX512": ["-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"],
}
_ISA_ORDER = ("DEFAULT", "AVX2", "AVX512")     # each runs wherever a later one does

_module: ModuleType | None = None
_tried = False
_reason: str | None = None


def enabled() -> bool:
    """Whether the extension may be used (``$TREELM_CXX`` is not ``0``)."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def _cpu_isa() -> str:
    """The instruction set PyTorch's kernels use here (``ATEN_CPU_CAPABILITY`` lowers it)."""
    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        cap = "DEFAULT"
    return cap if cap in _ISA_FLAGS else "DEFAULT"


def _isa() -> str:
    """The instruction set the loops are built for: ``$TREELM_CXX_ISA`` where set, else the
    CPU's. Raises ``ValueError`` for an unknown one, or one this CPU does not run (the binary
    would die of an illegal instruction)."""
    cpu = _cpu_isa()
    asked = os.environ.get(ISA_ENV, "").strip().upper()
    if asked in ("", "AUTO"):
        return cpu
    if asked not in _ISA_ORDER:
        choices = ", ".join(i.lower() for i in ("auto", *_ISA_ORDER))
        raise ValueError(f"${ISA_ENV}={asked.lower()!r}: one of {choices}")
    if _ISA_ORDER.index(asked) > _ISA_ORDER.index(cpu):
        raise ValueError(f"${ISA_ENV}={asked.lower()}: this CPU runs {cpu.lower()} at most")
    return asked


def flags() -> list[str]:
    """The compiler flags (see the module docstring; raises as :func:`_isa`)."""
    return ["-O3", "-fopenmp", "-fno-trapping-math", "-ffp-contract=fast",
            *_ISA_FLAGS.get(_isa(), [])]


def name() -> str:
    """The extension's name: instruction set and a hash of what determines the binary."""
    h = hashlib.sha256()
    for path in (*SOURCES, *HEADERS):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(" ".join([*flags(), torch.__version__, sys.version]).encode())
    return f"treelm_loops_{_isa().lower()}_{h.hexdigest()[:10]}"


def build_dir() -> Path:
    """Where the extension is built: ``$TORCH_EXTENSIONS_DIR/<name>`` (default root: the user's
    cache, as PyTorch's)."""
    from torch.utils.cpp_extension import get_default_build_root

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    return Path(root) / name()


def _import(path: Path, mod_name: str) -> ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_extension(verbose: bool = False) -> tuple[ModuleType, bool]:
    """The extension, built first where no built file is found; and whether it was built now.
    Raises what the build raises (no compiler, a compile error)."""
    mod_name, folder = name(), build_dir()
    built = folder / f"{mod_name}.so"
    if built.exists():
        try:
            return _import(built, mod_name), False
        except ImportError:         # e.g. a half-written file of a concurrent build: build it
            pass
    from torch.utils.cpp_extension import load as cpp_load

    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():     # its compiler-version warnings: the build says enough
        warnings.simplefilter("ignore")
        module = cpp_load(mod_name, [str(p) for p in SOURCES], extra_cflags=flags(),
                          extra_ldflags=["-fopenmp"], build_directory=str(folder),
                          verbose=verbose)
    return module, True


def load() -> ModuleType | None:
    """The compiled extension, or ``None`` when it is switched off or cannot be had (said once
    on stderr, with the reason). Builds it on first use where ``make setup`` did not."""
    global _module, _tried, _reason
    if not enabled():
        return None
    if _tried:
        return _module
    _tried = True
    try:
        if not (build_dir() / f"{name()}.so").exists():
            if compiler() is None:
                raise RuntimeError(f"no C++ compiler ({os.environ.get('CXX', 'c++')}) to build it")
            print(f"treelm: compiling the C++ time loops once, into {build_dir()}",
                  file=sys.stderr, flush=True)
        _module, _ = compile_extension()
    except Exception as e:  # whatever fails, the Python path still runs
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        _reason = f"{type(e).__name__}: {first}"
        print(f"treelm: C++ time loops unavailable ({_reason}); using the Python paths",
              file=sys.stderr, flush=True)
        _module = None
    return _module


def compiler() -> str | None:
    """The C++ compiler PyTorch's extension builder will call (``$CXX``, else ``c++``), if it is
    on the path."""
    return shutil.which(os.environ.get("CXX", "c++"))


def unavailable_reason() -> str | None:
    """Why :func:`load` returned ``None`` (after it was called), else ``None``."""
    if not enabled():
        return f"${ENV_VAR}=0"
    return _reason


def main() -> int:
    if not enabled():
        print(f"treelm: ${ENV_VAR}=0, not building the C++ time loops")
        return 0
    t0 = time.perf_counter()
    try:
        _, built = compile_extension()
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        print(f"treelm: could not build the C++ time loops ({type(e).__name__}: {first}); "
              "the Python paths will run instead")
        return 0        # not fatal: treelm works without it
    what = "built" if built else "already built"
    print(f"treelm: C++ time loops {what} in {build_dir()} "
          f"({time.perf_counter() - t0:.1f} s; flags {' '.join(flags())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
