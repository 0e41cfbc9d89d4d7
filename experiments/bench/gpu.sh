#!/usr/bin/env bash
# Issue 27 on the accelerator machine, one command within BUDGET seconds (default 560: one call
# of at most 10 minutes, leaving the machine's start inside a 15-minute session):
#   1. CUDA tests: the captured step (tests/training/test_graph_step.py) and CUDA = CPU
#   2. the benchmark on the GPU, ratio per config, with the captured step beside the plain
#      ensemble (bench_train.py --device cuda --graph)
#   3. both tables under the chosen reading (TABLES/table1, table2; TABLES defaults to the screen's
#      choice, experiments/readings/screen/f14, which replaced mlp-4x) into
#      fresh stores (rows only), each sweep timed by its store; sweeps on CUDA train with the
#      captured step (interp.training.fast_train.train_ensemble: graph on CUDA by default)
#   4. tables_summary.py, then everything packed into OUT/gpu-results.tar.gz: unpack it at the
#      repo root (tar -xzf gpu-results.tar.gz) to get experiments/bench/gpu/, which is committed
# Each step has a deadline (SIGINT first: a sweep records "interrupted" and keeps what finished).
#
#   bash experiments/bench/gpu.sh OUT [BUDGET_SECONDS]   on the device machine, at the repo root
#   bash experiments/bench/gpu.sh --dry-run OUT           here, on the CPU: the same steps, small
#   bash experiments/bench/gpu.sh --pack                  here: .devcarry/devsite.tar.xz, the
#        packages the device image lacks (TransformerLens and its pure-Python needs)
#
# The device image has Python 3.12 with torch, numpy, pandas, einops, jaxtyping and pytest but
# not TransformerLens (experiments/readings/device-runs.md): run --pack here first, then on the
# device carry .devcarry (its folder must be ignored: echo /.devcarry/ >> .git/info/exclude):
#   run(command="bash experiments/bench/gpu.sh $OUT 560", carry=[".devcarry"], timeout_s=600)
# Environment: PYTHON (default python3, or .venv/bin/python when it exists), WORKERS (sweep
# worker processes sharing the GPU, default 4: the host draws each batch, so one process keeps
# one core busy), RES (results folder, default experiments/bench/gpu), TABLES (the two table
# folders' parent, default experiments/readings/screen/f14).
set -u
MODE=run
case "${1:-}" in --dry-run) MODE=dry; shift ;; --pack) MODE=pack ;; esac

if [ "$MODE" = pack ]; then
    SITE=$(ls -d .venv/lib/python3*/site-packages | head -n 1)
    rm -rf .devcarry/devsite && mkdir -p .devcarry/devsite
    for p in transformer_lens better_abc datasets dill multiprocess _multiprocess fancy_einsum beartype typeguard; do
        cp -r "$SITE"/$p "$SITE"/$p-*.dist-info .devcarry/devsite/ 2>/dev/null || cp -r "$SITE"/$p* .devcarry/devsite/
    done
    tar -C .devcarry -cJf .devcarry/devsite.tar.xz devsite && rm -r .devcarry/devsite
    grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo /.devcarry/ >> .git/info/exclude
    ls -la .devcarry; exit 0
fi

OUT=${1:?usage: gpu.sh [--dry-run] OUT [BUDGET_SECONDS] | gpu.sh --pack}
BUDGET=${2:-560}
TABLES=${TABLES:-experiments/readings/screen/f14}
for t in table1 table2; do
  [ -f "$TABLES/$t/configs.py" ] || { echo "TABLES=$TABLES: no $t/configs.py there (accepted: a folder with table1/ and table2/ sweep folders)" >&2; exit 2; }
done
T0=$(date +%s)
mkdir -p "$OUT"
if [ -f .devcarry/devsite.tar.xz ] && [ ! -d .devcarry/devsite ]; then tar -xJf .devcarry/devsite.tar.xz -C .devcarry; fi
export PYTHONPATH="$PWD:$PWD/.devcarry/devsite${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -x .venv/bin/python ]; then PY=${PYTHON:-.venv/bin/python}; else PY=${PYTHON:-python3}; fi
WORKERS=${WORKERS:-4}
if [ "$MODE" = dry ]; then
    DEVICE=cpu; RES=${RES:-$OUT/gpu}; WORKERS=1
    BENCH=(--only 8 --steps 3 --repeats 1)
    WHERE1=(--where case=3 --where d_token=2 --limit 1); WHERE2=(--where n=2 --where n_layers=2 --where d_token=16)
else
    DEVICE=cuda; RES=${RES:-experiments/bench/gpu}
    BENCH=(--steps 20 --repeats 2)
    WHERE1=(); WHERE2=()
fi
mkdir -p "$RES/logs" "$RES/tables"
left() { echo $((BUDGET - ($(date +%s) - T0))); }
say() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$RES/logs/session.txt"; }
# run CMD with a deadline at (BUDGET - RESERVE) seconds from the start, at most CAP seconds
boxed() {
    local reserve=$1 cap=$2; shift 2
    local t; t=$(($(left) - reserve)); ((t > cap)) && t=$cap
    if ((t < 5)); then say "skipped (no time left): $*"; return 124; fi
    timeout --signal=INT --kill-after=15 "$t" "$@"
}

say "mode $MODE, device $DEVICE, budget $BUDGET s, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$RES/logs/session.txt"
$PY -c "import torch, transformer_lens, interp; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" \
    2>&1 | tee -a "$RES/logs/session.txt" | grep -q "^torch" || { say "python cannot import torch/transformer_lens/interp (run --pack here, carry .devcarry)"; exit 3; }

say "1. tests (CUDA ones skip without a GPU)"
boxed 470 90 $PY -m pytest -q -p no:cacheprovider -x tests/training/test_graph_step.py \
    tests/training/test_training.py tests/sweeps/test_sweeps.py -k "cuda or device or graph" \
    > "$RES/logs/tests.txt" 2>&1
say "   $(tail -n 1 "$RES/logs/tests.txt")"

say "2. benchmark, device $DEVICE, captured step beside the plain ensemble"
boxed 360 150 $PY experiments/bench/bench_train.py --device "$DEVICE" --graph "${BENCH[@]}" \
    --out "$RES/bench-$DEVICE.md" > "$RES/logs/bench.txt" 2>&1
say "   $(grep -c '^| case' "$RES/logs/bench.txt") table rows (wall and CPU)"

say "3. both tables under $TABLES into fresh stores, $WORKERS worker(s)"
SWEEP=($PY -m interp sweep --device "$DEVICE" --workers "$WORKERS" --threads 1 --no-checkpoints --save-every 60)
boxed 150 400 "${SWEEP[@]}" "$TABLES/table1" "${WHERE1[@]}" \
    --store "$RES/tables/table1/store.sqlite" > "$RES/logs/sweep-table1.txt" 2>&1
say "   $(grep -a '^sweep table1: .*declared' "$RES/logs/sweep-table1.txt" | tail -n 1)"
boxed 25 600 "${SWEEP[@]}" "$TABLES/table2" "${WHERE2[@]}" \
    --store "$RES/tables/table2/store.sqlite" > "$RES/logs/sweep-table2.txt" 2>&1
say "   $(grep -a '^sweep table2: .*declared' "$RES/logs/sweep-table2.txt" | tail -n 1)"

say "4. summary and packing"
timeout 20 $PY experiments/bench/tables_summary.py "$RES/tables" --tables "$TABLES" --out "$RES/tables.md" > "$RES/logs/summary.txt" 2>&1
tail -n 2 "$RES/tables.md" 2>/dev/null | tee -a "$RES/logs/session.txt"
rm -rf "$RES"/tables/*/progress  # a cut group's saved state: only useful to resume here
tar -czf "$OUT/gpu-results.tar.gz" "$RES"
cp "$RES/logs/session.txt" "$OUT/session.txt"
say "done: $OUT/gpu-results.tar.gz ($(du -h "$OUT/gpu-results.tar.gz" | cut -f1))"
