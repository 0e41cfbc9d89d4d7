#!/usr/bin/env bash
# Issue 51 item 3: retrain the core atlas's successful lookups and measure their geometry and
# learned dimension (geometry.py's docstring; PREDICTIONS-geometry.md). Resumable: stop it any
# time, run it again. --finish measures and writes core-atlas-geometry/.
#
#   bash experiments/atlas/geometry.sh [-w WORKERS]   # train (attention-only first)
#   bash experiments/atlas/geometry.sh --finish       # interp atlas --das --geometry -> core-atlas-geometry/
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/atlas
store=$here/geometry/results/store.sqlite
out=$here/core-atlas-geometry
workers=2
stamp() { echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) code $(git rev-parse --short=12 HEAD)"; }
case "$#:${1:-}" in
  0:) ;;
  2:-w) workers=$2; [[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "WORKERS=$workers: accepted: a whole number >= 1" >&2; exit 2; } ;;
  1:--finish)
    mkdir -p "$out"
    [ -s "$out/atlas.csv" ] || cp $here/core-atlas-2level/atlas.csv "$out/atlas.csv"
    echo "== measure $(stamp)"
    .venv/bin/interp atlas "$store" --out "$out" --das --geometry
    # atlas.md and its maps would count only these seeds (all successes): not this folder's report
    rm -f "$out/atlas.md" "$out/atlas-success.png" "$out/atlas-mechanism.png"
    .venv/bin/python $here/geometry_report.py > /dev/null
    .venv/bin/python $here/geometry_figure.py
    echo "== done $(stamp)"
    exit 0 ;;
  *) echo "usage: geometry.sh [-w WORKERS] | --finish" >&2; exit 2 ;;
esac
.venv/bin/python $here/geometry.py --write-folders
mkdir -p "$here/geometry/results"
for part in attention-only mlp-4x; do
  echo "== $part $(stamp)"
  .venv/bin/interp sweep "$here/geometry/$part" --store "$store" --workers "$workers"
done
echo "== trained $(stamp): geometry.sh --finish"
