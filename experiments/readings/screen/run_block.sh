#!/usr/bin/env bash
# Train one block of the screen (DESIGN.md, section 8) into the study's one store; resumable:
# a rerun trains only the runs the store lacks. Usage: run_block.sh 1|2|M [WORKERS]
# (M: block M's anchors none and every-4d retrained here, after the drift check tripped)
set -euo pipefail
cd "$(dirname "$0")/../../.."
block=${1:?usage: run_block.sh 1|2|M [WORKERS]}
workers=${2:-2}
case $block in
  1) names="f01 f02 f03 f04 f05 f06 f07 f08" ;;
  2) names="f09 f10 f11 f12 f13 f14 f15 f16 m-last-2048" ;;
  M) names="a-none a-every-4d" ;;
  *) echo "block=$block; accepted: 1, 2 or M" >&2; exit 2 ;;
esac
store=experiments/readings/screen/results/store.sqlite
for name in $names; do
  echo "== $name $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  .venv/bin/interp sweep "experiments/readings/screen/$name" --store "$store" --workers "$workers"
  .venv/bin/interp report "experiments/readings/screen/$name" --store "$store"
done
