#!/usr/bin/env bash
# The fused ON-LSTM's training speed against nn.LSTM at the paper's size on the AVX2 path, at two
# commits and per GEMM backend, in one go (issue 49 item 3: 0.97x on 2026-11-23, 0.65-0.85x now).
#
#     benchmarks/avx2_bisect.sh [OLD [NEW]]        # defaults: 1c63f98 (the record's commit), HEAD
#
# Run it alone on the machine (nothing else running: it times wall clock), about 5 minutes on
# 2 cores. On a CPU with AVX-512 it is the AVX2 proxy: PyTorch (ATEN_CPU_CAPABILITY), MKL
# (MKL_ENABLE_INSTRUCTIONS), oneDNN (ONEDNN_MAX_CPU_ISA) and treelm's C++ loops (TREELM_CXX_ISA,
# and ATEN_CPU_CAPABILITY at commits older than that variable) limited to AVX2 and FMA; on an
# AVX2-only CPU the same variables change nothing.
#
# Each commit's treelm/ and benchmarks/ are taken out with `git archive` into $OUT/tree-<sha>
# (nothing in the checkout or in .git changes) and run with this checkout's venv, PYTHONPATH
# pointing at that tree; both commits' C++ loops are built first (untimed, cached per source
# hash in $TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions). Then benchmarks/cells.py
# --sizes paper (nn.LSTM, onlstm.fused, gemm-floor.onlstm) runs for every backend in $BACKENDS
# (auto measures per shape; mm, mkl, onednn forced), the two commits taking turns (old first for
# one backend, new first for the next) so that drift of the machine hits both, and finally NEW
# with auto again under GOMP_SPINCOUNT=10000 (what `treelm train` sets: treelm/omp.py;
# cells.py itself keeps libgomp's default). Records: $OUT/cells-<sha>-<backend>.json (not
# committed); $OUT/summary.txt: per run the fused and nn.LSTM training tokens/s, their ratio, the
# floor's, the C++ loops used and the recurrent products' backends.
#
# Environment: OUT (default /tmp/avx2-bisect), BACKENDS (default "auto onednn mm mkl"), SIZES
# (default paper), REPEATS (default 5), PY (default this checkout's .venv/bin/python).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
OLD=${1:-1c63f98}
NEW=${2:-HEAD}
OUT=${OUT:-/tmp/avx2-bisect}
BACKENDS=${BACKENDS:-auto onednn mm mkl}
SIZES=${SIZES:-paper}
REPEATS=${REPEATS:-5}
MODELS="nn.LSTM onlstm.fused gemm-floor.onlstm"

export ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
export TREELM_CXX_ISA=avx2
mkdir -p "$OUT"

tree_of() {     # commit -> a directory holding its treelm/ and benchmarks/
    local sha dir
    sha=$(git -C "$ROOT" rev-parse --short "$1")
    dir="$OUT/tree-$sha"
    if [ ! -d "$dir/treelm" ]; then
        mkdir -p "$dir"
        git -C "$ROOT" archive "$sha" treelm benchmarks | tar -x -C "$dir"
    fi
    echo "$dir"
}

OLD_TREE=$(tree_of "$OLD")
NEW_TREE=$(tree_of "$NEW")

for tree in "$OLD_TREE" "$NEW_TREE"; do
    where=$(cd "$tree" && PYTHONPATH="$tree" "$PY" -c \
        'import treelm, torch; print(treelm.__file__, torch.backends.cpu.get_cpu_capability())')
    case "$where" in
        "$tree"/treelm/*" AVX2") ;;
        *) echo "avx2_bisect: $tree imports $where, not its own treelm on AVX2" >&2; exit 1 ;;
    esac
    echo "== building the C++ loops of $tree (untimed)" >&2
    (cd "$tree" && PYTHONPATH="$tree" "$PY" -m treelm.kernels.build) >&2
done

run() {     # tree label backend [VAR=value ...]: one cells.py run into $OUT
    local tree=$1 label=$2 backend=$3
    shift 3
    local isa=()
    grep -q -- '"--isa"' "$tree/benchmarks/cells.py" && isa=(--isa avx2)
    echo "== $label, --gemm $backend $*" >&2
    # shellcheck disable=SC2086
    (cd "$tree" && env "$@" PYTHONPATH="$tree" "$PY" benchmarks/cells.py --sizes $SIZES \
        --models $MODELS --repeats "$REPEATS" --gemm "$backend" ${isa[@]+"${isa[@]}"} \
        --out "$OUT/cells-$label-$backend.json")
}

old_label=$(basename "$OLD_TREE" | sed 's/^tree-//')
new_label=$(basename "$NEW_TREE" | sed 's/^tree-//')
turn=0
for backend in $BACKENDS; do
    if [ $((turn % 2)) -eq 0 ]; then
        run "$OLD_TREE" "$old_label" "$backend"
        run "$NEW_TREE" "$new_label" "$backend"
    else
        run "$NEW_TREE" "$new_label" "$backend"
        run "$OLD_TREE" "$old_label" "$backend"
    fi
    turn=$((turn + 1))
done
run "$NEW_TREE" "$new_label-spin10000" auto GOMP_SPINCOUNT=10000

"$PY" - "$OUT" "$old_label" "$new_label" <<'EOF' | tee "$OUT/summary.txt"
import json, sys
from pathlib import Path

out, old, new = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
print(f"AVX2 path, old {old} / new {new}: training tokens/s (median), fused / nn.LSTM")
print(f"{'run':<28} {'size':<6} {'nn.LSTM':>8} {'fused':>8} {'ratio':>6} {'floor':>8} "
      f"{'fl/LSTM':>7}  C++ loops; recurrent products (fwd, bwd)")
for path in sorted(out.glob("cells-*.json")):
    rec = json.loads(path.read_text())
    by = {(r["size"], r["model"]): r for r in rec["results"] if "error" not in r}
    cxx = rec.get("cxx", {})
    loops = cxx.get("extension", "python: " + str(cxx.get("reason")))
    for size in rec["sizes"]:
        lstm, fused, floor = (by.get((size, m)) for m in
                              ("nn.LSTM", "onlstm.fused", "gemm-floor.onlstm"))
        if not (lstm and fused):
            print(f"{path.stem[6:]:<28} {size:<6} (missing: an error, see {path.name})")
            continue
        tok = {k: v["train"]["tokens_per_s"] for k, v in
               (("lstm", lstm), ("fused", fused), ("floor", floor)) if v}
        rec_products = [f"{d['backend']}" for d in fused["train"].get("gemm", [])
                        if d.get("steps", 1) > 1]
        print(f"{path.stem[6:]:<28} {size:<6} {tok['lstm']:8.0f} {tok['fused']:8.0f} "
              f"{tok['fused'] / tok['lstm']:6.2f} {tok.get('floor', float('nan')):8.0f} "
              f"{tok.get('floor', float('nan')) / tok['lstm']:7.2f}  {loops}; "
              f"{', '.join(rec_products)}")
EOF
