#!/usr/bin/env bash
# Re-time the paper's two tables (the paper's protocol) on this machine's idle cores into fresh
# stores under DIR, then their reports and DIR/timing.md (issue 27, item 3):
#   bash experiments/bench/retime.sh experiments/bench/tables-cpu-2 [WORKERS]          # attention-only
#   bash experiments/bench/retime.sh experiments/bench/tables-f14 2 experiments/readings/screen/f14
# DIR and TABLES are read from the repo root (or absolute). TABLES (default experiments) is the folder whose table1/ and table2/ are the sweep folders:
# experiments/ the attention-only tables, a screen combination's folder its two tables.
# Refuses a DIR whose stores already hold runs (a timing must be one uninterrupted sweep per
# table). Run it with nothing else on the machine: timing.md prints the load at each start.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: retime.sh DIR [WORKERS] [TABLES]}
workers=${2:-2}
tables=${3:-experiments}
for table in table1 table2; do
  [ -f "$tables/$table/configs.py" ] || { echo "TABLES '$tables': no $table/configs.py there (accepted: experiments or a folder with table1/ and table2/ sweep folders)" >&2; exit 2; }
done
for table in table1 table2; do
  if [ -s "$dir/$table/results/store.sqlite" ]; then
    echo "$dir/$table/results/store.sqlite exists: choose a fresh DIR (a timing is one uninterrupted sweep)" >&2
    exit 2
  fi
done
for table in table1 table2; do
  mkdir -p "$dir/$table/results"
  echo "== $table $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  .venv/bin/interp sweep "$tables/$table" --store "$dir/$table/results/store.sqlite" --workers "$workers"
  .venv/bin/interp report "$tables/$table" --store "$dir/$table/results/store.sqlite" --out "$dir/$table"
done
.venv/bin/python experiments/bench/tables_cpu.py --dir "$dir" --tables "$tables" > /dev/null
echo "wrote $dir/timing.md"
