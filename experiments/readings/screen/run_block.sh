#!/usr/bin/env bash
# Train one block of the screen (DESIGN.md, section 8) into the study's one store; resumable:
# a rerun trains only the runs the store lacks. Usage: run_block.sh 1|2|M|NAME... [-w WORKERS]
# (M: block M's anchors none and every-4d retrained here, after the drift check tripped; a NAME
# is any sweep folder here, e.g. c1 or a close call's folder). run_block.sh --prepare only makes
# the pinned worktree (below) and exits: run_rest.sh compares run names under it first.
#
# The store is local and a session may start from a fresh clone, so the runs' rows are kept in
# git: the sweeps store rows only (--no-checkpoints: the screen reads accuracies and curves, never
# a model), after each folder `interp store rows` copies the store's rows, without checkpoints, to
# store-snapshot.sqlite (to commit with the folder's report), and with no store here the snapshot is
# copied in first.
#
# The code is pinned (DESIGN.md, section 9): the `interp` package is imported from a detached
# worktree of commit $PIN, so a later change to the engine cannot enter the screen; the sweep
# folders, the store and the reports are this checkout's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
PIN=9996044ffff49cd919294a3e6ab8f7c5036dd695
workers=2
names=""
prepare=""
while [ $# -gt 0 ]; do
  case $1 in
    --prepare) prepare=1; shift ;;
    -w) workers=${2:?-w needs a number}; shift 2 ;;
    1) names="$names f01 f02 f03 f04 f05 f06 f07 f08"; shift ;;
    2) names="$names f09 f10 f11 f12 f13 f14 f15 f16 m-last-2048"; shift ;;
    M) names="$names a-none a-every-4d"; shift ;;
    *) [ -f "experiments/readings/screen/$1/configs.py" ] || {
         echo "block or folder '$1': accepted 1, 2, M or a folder of experiments/readings/screen with configs.py" >&2; exit 2; }
       names="$names $1"; shift ;;
  esac
done
[ -n "$names$prepare" ] || { echo "usage: run_block.sh 1|2|M|NAME... [-w WORKERS] | --prepare" >&2; exit 2; }
pinned="${TMPDIR:-/tmp}/interp-screen-${PIN:0:12}"
if [ ! -d "$pinned/interp" ]; then
  git worktree prune  # a worktree whose folder went with an earlier session's /tmp
  git worktree add --detach "$pinned" "$PIN" >/dev/null
fi
export PYTHONPATH="$pinned"
.venv/bin/python -P -c "import interp, sys; sys.exit(0 if interp.__file__.startswith('$pinned') else 'interp is not imported from the pinned worktree')"
[ -z "$prepare" ] || exit 0
store=experiments/readings/screen/results/store.sqlite
snapshot=experiments/readings/screen/store-snapshot.sqlite
if [ ! -f "$store" ] && [ -f "$snapshot" ]; then
  mkdir -p "$(dirname "$store")"
  cp "$snapshot" "$store"
  echo "no store: copied $snapshot (the runs committed with it count as trained)"
fi
for name in $names; do
  echo "== $name $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) code ${PIN:0:12}"
  .venv/bin/interp sweep "experiments/readings/screen/$name" --store "$store" --workers "$workers" --save-every 180 \
    --no-checkpoints
  .venv/bin/interp report "experiments/readings/screen/$name" --store "$store"
  env -u PYTHONPATH .venv/bin/interp store rows "$store" "$snapshot"  # this checkout's interp: it has `store rows`
done
