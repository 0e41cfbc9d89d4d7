#!/usr/bin/env bash
# Issue 29's core grid across sessions whose disk does not last (README, "Running the atlas"):
#
#   bash experiments/atlas/run_core.sh [-w WORKERS]   # train what is left; resumable, stop it any time
#   bash experiments/atlas/run_core.sh --finish       # at a session's end: measure, then write the rows
#
# Training: with no store, the store starts from the committed rows (store-rows.sqlite: every run
# trained in an earlier session counts as trained, so none trains twice). Then core/attention-only,
# which does not depend on issue 28's gate. Then core/mlp-4x, only once the screen's gate has
# decided (experiments/readings/screen/scores.md, "Decision") and the atlas's reading
# (atlas_predictions.MLP_READING) is the combination that replaced mlp-4x, or none when it stays:
# PREDICTIONS.md fixes the MLP architecture by that decision, so no MLP run may start before it.
# --finish: interp atlas measures every seed trained here while its checkpoint is on disk (into
# core-atlas/, reusing the committed atlas.csv's rows), then interp store rows writes the store's
# rows without checkpoints to store-rows.sqlite. Commit both. Stop training first.
# ATLAS_DIR and SCREEN_SCORES (defaults: experiments/atlas and the screen's scores.md) are for
# tests, which run it on a grid of a few short runs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
here=${ATLAS_DIR:-experiments/atlas}
scores=${SCREEN_SCORES:-experiments/readings/screen/scores.md}
store=$here/results/store.sqlite
rows=$here/store-rows.sqlite
out=$here/core-atlas
workers=2
usage() { echo "usage: run_core.sh [-w WORKERS] | --finish${1:+ ($1)}" >&2; exit 2; }
case "$#:${1:-}" in
  0:) ;;
  2:-w) workers=$2; [[ "$workers" =~ ^[1-9][0-9]*$ ]] || usage "WORKERS=$workers: a whole number >= 1" ;;
  1:--finish) ;;
  *) usage ;;
esac
stamp() { echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) code $(git rev-parse --short=12 HEAD)"; }

if [ "${1:-}" = --finish ]; then
  if pgrep -f "interp sweep $here/" > /dev/null; then
    echo "an atlas sweep is still running: stop it first (pkill -TERM -f 'interp sweep $here/')" >&2; exit 1
  fi
  [ -s "$store" ] || { echo "no store at $store: nothing trained in this session" >&2; exit 1; }
  echo "== measure $(stamp)"
  .venv/bin/interp atlas "$store" --out "$out"
  echo "== rows $(stamp)"
  env -u PYTHONPATH .venv/bin/interp store rows "$store" "$rows"
  echo "commit $out and $rows"
  exit 0
fi

mkdir -p "$here/results"
if [ ! -s "$store" ] && [ -s "$rows" ]; then
  cp "$rows" "$store.tmp" && mv "$store.tmp" "$store"
  echo "== store started from the committed rows ($rows)"
fi
echo "== core/attention-only $(stamp)"
.venv/bin/interp sweep "$here/core/attention-only" --store "$store" --workers "$workers"

decision=$(sed -n 's/^Decision: //p' "$scores")
case "$decision" in
  waiting*|"") echo "== core/mlp-4x not started: issue 28's gate has not decided (${decision:-no Decision line})"; exit 0 ;;
esac
replaced=$(sed -n 's/^\([^ ]*\) replaces mlp-4x\.$/\1/p' <<< "$decision")
reading=$(.venv/bin/python -c "from interp.inspect.studies.atlas_predictions import MLP_READING as r; print(r or '')")
if [ "$reading" != "$replaced" ]; then
  echo "== core/mlp-4x not started: the gate says '$decision' but the atlas's reading is" \
       "'${reading:-mlp-4x}'; make the switch (README, 'If issue 28's screen replaces mlp-4x')" \
       "and commit it first" >&2
  exit 1
fi
echo "== core/mlp-4x $(stamp): $decision"
.venv/bin/interp sweep "$here/core/mlp-4x" --store "$store" --workers "$workers"
echo "== done $(stamp): run_core.sh --finish, then commit"
