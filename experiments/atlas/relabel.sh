#!/usr/bin/env bash
# Issue 42: retrain the core grid's measured cells and measure both label levels (relabel.py's
# docstring). Resumable: stop it any time, run it again. --finish measures and writes.
#
#   bash experiments/atlas/relabel.sh [-w WORKERS]   # train (cheapest part first)
#   bash experiments/atlas/relabel.sh --finish       # interp atlas -> core-atlas-2level/
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/atlas
store=$here/relabel/results/store.sqlite
workers=2
case "$#:${1:-}" in
  0:) ;;
  2:-w) workers=$2 ;;
  1:--finish)
    .venv/bin/interp atlas "$store" --out "$here/core-atlas-2level"
    exit 0 ;;
  *) echo "usage: relabel.sh [-w WORKERS] | --finish" >&2; exit 2 ;;
esac
.venv/bin/python $here/relabel.py --write-folders
mkdir -p "$here/relabel/results"
for part in attention-only-small attention-only-large mlp-4x; do
  echo "== $part $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  .venv/bin/interp sweep "$here/relabel/$part" --store "$store" --workers "$workers"
done
echo "== done $(date -u +%H:%M:%S): relabel.sh --finish"
