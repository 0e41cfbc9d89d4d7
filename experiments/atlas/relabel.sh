#!/usr/bin/env bash
# Issue 42: retrain the core grid's measured cells and measure both label levels (relabel.py's
# docstring). Resumable: stop it any time, run it again. --finish measures and writes.
#
#   bash experiments/atlas/relabel.sh [-w WORKERS]   # train (cheapest part first)
#   bash experiments/atlas/relabel.sh --finish       # interp atlas -> core-atlas-2level/, rows -> relabel/store-rows.sqlite
#
# Across sessions whose disk does not last: --finish also writes the store's rows without
# checkpoints to relabel/store-rows.sqlite (commit it with core-atlas-2level/); a later session
# starts its store from those rows, so the runs measured before are not trained again (their
# sealed atlas.csv rows are reused: the code level needs no checkpoint once measured).
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
    env -u PYTHONPATH .venv/bin/interp store rows "$store" "$here/relabel/store-rows.sqlite"
    .venv/bin/python $here/two_level.py > /dev/null
    exit 0 ;;
  *) echo "usage: relabel.sh [-w WORKERS] | --finish" >&2; exit 2 ;;
esac
.venv/bin/python $here/relabel.py --write-folders
mkdir -p "$here/relabel/results"
if [ ! -s "$store" ] && [ -s "$here/relabel/store-rows.sqlite" ]; then
  cp "$here/relabel/store-rows.sqlite" "$store.tmp" && mv "$store.tmp" "$store"
  echo "== store started from the committed rows (relabel/store-rows.sqlite)"
fi
for part in attention-only-small attention-only-large mlp-4x; do
  echo "== $part $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  .venv/bin/interp sweep "$here/relabel/$part" --store "$store" --workers "$workers"
done
echo "== done $(date -u +%H:%M:%S): relabel.sh --finish"
