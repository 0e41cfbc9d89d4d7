#!/usr/bin/env bash
# One accelerator-machine session for issue 16, time-boxed to fit one call of BUDGET seconds:
#   1. the CUDA tests (CUDA results equal the CPU's; the fast path equals TransformerLens on CUDA)
#   2. the training benchmark on the GPU (plain TransformerLens loop vs ours, side by side)
#   3. the readings' diagnostic cells still missing from their stores
#   4. the declared score (experiments/readings/score.py) and, if it chooses a reading, that
#      reading's full Table 2 and Table 1 (largest groups first); else Table 1 attention-only
#   5. reports, and everything packed into OUT/results.tar.gz
# Sweeps run one process at a time: several processes sharing one GPU were slower (device-runs.md).
# Every sweep is resumable and stores rows only (--no-checkpoints: the machine's disk goes away),
# so a sweep cut by the deadline keeps what finished, and the group it was training is saved every
# 60 s to its store's progress/ folder (packed too): rerun this script, or the same sweep on any
# machine, to go on (off the GPU it goes on to float rounding, not bit for bit).
#
#   bash experiments/readings/gpu_session.sh OUT [BUDGET_SECONDS]     (repo root; python3 with CUDA torch)
set -u
OUT=${1:?usage: gpu_session.sh OUT [BUDGET_SECONDS]}
BUDGET=${2:-540}
T0=$(date +%s)
PY=${PYTHON:-python3}
mkdir -p "$OUT/logs"
left() { echo $((BUDGET - ($(date +%s) - T0))); }
say() { echo "[$(($(date +%s) - T0)) s] $*"; }
# run CMD with a deadline at (BUDGET - RESERVE) seconds; SIGINT first, so sweeps record "interrupted"
boxed() {
    local reserve=$1 cap=$2; shift 2
    local t; t=$(($(left) - reserve)); ((t > cap)) && t=$cap
    if ((t < 5)); then say "skipped (no time left): $*"; return 124; fi
    timeout --signal=INT --kill-after=15 "$t" "$@"
}
DEVICE=${DEVICE:-cuda}  # DEVICE=cpu SWEEP_EXTRA="--limit 1" tries the script's plumbing without a GPU
# a sweep that keeps rows only: interp sweep DIR --workers W ...
SWEEP=($PY -m interp sweep --device "$DEVICE" --threads 1 --no-checkpoints --save-every 60 ${SWEEP_EXTRA:-})

say "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, transformer_lens, interp; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 3

say "1. CUDA tests"
boxed 420 80 $PY -m pytest -q -p no:cacheprovider tests/training/test_training.py \
    tests/sweeps/test_sweeps.py -k "cuda or device" 2>&1 | tail -n 15 | tee "$OUT/logs/tests.txt"

say "2. benchmark on the GPU"
boxed 380 60 $PY experiments/bench/bench_train.py --device "$DEVICE" --out "$OUT/logs/bench-cuda.md" \
    > "$OUT/logs/bench-cuda.txt" 2>&1; tail -n 12 "$OUT/logs/bench-cuda.txt"
boxed 340 60 $PY experiments/bench/bench_train.py --device "$DEVICE" --mlp --out "$OUT/logs/bench-cuda-mlp.md" \
    > "$OUT/logs/bench-cuda-mlp.txt" 2>&1; tail -n 8 "$OUT/logs/bench-cuda-mlp.txt"

say "3. the readings' remaining diagnostic cells, one sweep process at a time"
# one process per GPU: 16 workers sharing the H100 finished nothing in 230 s (device-runs.md)
for r in torch-encoder mlp-1x mlp-4x; do
    boxed 200 400 "${SWEEP[@]}" experiments/readings/$r --workers 1 > "$OUT/logs/sweep-$r.txt" 2>&1
    tail -n 3 "$OUT/logs/sweep-$r.txt"
done

say "4. score"
$PY experiments/readings/score.py > "$OUT/logs/score.txt" 2>&1
head -n 14 "$OUT/logs/score.txt"
CHOSEN=$($PY experiments/readings/score.py --chosen 2>/dev/null)
if [ -n "$CHOSEN" ]; then
    say "chosen: $CHOSEN; its full tables, one after the other"
    T2=experiments/readings/$CHOSEN/table2 T1=experiments/readings/$CHOSEN/table1
    # the reading's own store: its diagnostic cells are runs of these tables, stored once
    STORE=(--store experiments/readings/$CHOSEN/results/store.sqlite)
    boxed 40 600 "${SWEEP[@]}" "$T2" "${STORE[@]}" --workers 1 > "$OUT/logs/sweep-table2.txt" 2>&1
    boxed 40 600 "${SWEEP[@]}" "$T1" "${STORE[@]}" --workers 1 > "$OUT/logs/sweep-table1.txt" 2>&1
    DIRS="$T2 $T1"
else
    say "no reading chosen (cells left): Table 1 attention-only on the GPU for its timing"
    boxed 40 600 "${SWEEP[@]}" experiments/table1 --workers 1 --store gpu-table1/store.sqlite \
        > "$OUT/logs/sweep-table1.txt" 2>&1
    DIRS=""
fi
tail -n 6 "$OUT"/logs/sweep-table*.txt

say "5. reports and packing"
for d in $DIRS; do timeout 20 $PY -m interp report "$d" "${STORE[@]}" > "$OUT/logs/report-$(basename "$d").txt" 2>&1; done
cp -r "$OUT/logs" device-logs
tar -czf "$OUT/results.tar.gz" device-logs experiments/readings/*/results/store.sqlite \
    $(ls experiments/readings/*/results/progress/*.safetensors \
         experiments/readings/*/table?/results/progress/*.safetensors \
         experiments/readings/*/table?/results/store.sqlite experiments/readings/*/table?/report.md \
         experiments/readings/*/table?/violins.png gpu-table1/store.sqlite 2>/dev/null)
ls -la "$OUT"
say "done"
