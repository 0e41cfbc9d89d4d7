#!/usr/bin/env bash
# Re-time the paper's two tables (attention-only, the paper's protocol) on this machine's idle
# cores into fresh stores under DIR, then their reports and DIR/timing.md (issue 27, item 3):
#   bash experiments/bench/retime.sh experiments/bench/tables-cpu-2 [WORKERS]
# Refuses a DIR whose stores already hold runs (a timing must be one uninterrupted sweep per
# table). Run it with nothing else on the machine: timing.md prints the load at each start.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: retime.sh DIR [WORKERS]}
workers=${2:-2}
for table in table1 table2; do
  if [ -s "$dir/$table/results/store.sqlite" ]; then
    echo "$dir/$table/results/store.sqlite exists: choose a fresh DIR (a timing is one uninterrupted sweep)" >&2
    exit 2
  fi
done
for table in table1 table2; do
  mkdir -p "$dir/$table/results"
  echo "== $table $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  .venv/bin/interp sweep "experiments/$table" --store "$dir/$table/results/store.sqlite" --workers "$workers"
  .venv/bin/interp report "experiments/$table" --store "$dir/$table/results/store.sqlite" --out "$dir/$table"
done
.venv/bin/python experiments/bench/tables_cpu.py --dir "$dir" > /dev/null
echo "wrote $dir/timing.md"
