#!/usr/bin/env bash
# Issue 28's screen from block 2 to the held-out confirmation, unattended, each step as DESIGN.md
# (sections 3 and 6) declares it and score.py's decision code writes it:
#   1. block 2 (run_block.sh 2);
#   2. the composed combinations: score.py --compose writes c1 (and c2 where block M calls for
#      it), then they train (a composed copy of a candidate trains nothing: its runs are stored);
#   3. the close call: score.py --close-call writes <name>-s59 for the top two when their W is
#      within 2 (or says there is none), then they train;
#   4. the confirmation: score.py --tables writes both full tables of the choice and of the
#      retrained mlp-4x, then they train (their screening cells are stored: the held-out ones train).
# Every step is resumable (a rerun trains only what the store lacks) and waits for a run_block.sh
# already running, so it can follow one. Nothing is committed: commit each folder's report (and
# score.py's scores.md and seeds.csv) as it lands. Usage: run_rest.sh [-w WORKERS]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
here=experiments/readings/screen
py=.venv/bin/python
[ $# -eq 0 ] || [ $# -eq 2 -a "${1:-}" = -w ] || { echo "usage: run_rest.sh [-w WORKERS]" >&2; exit 2; }

busy() {  # a run_block.sh of this checkout is running (it works from the repo root)
  local pid
  for pid in $(pgrep -f "run_block[.]sh" || true); do
    [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$repo" ] && return 0
  done
  return 1
}
while busy; do  # one sweep at a time on the study's store
  echo "waiting for a running run_block.sh ($(date -u +%H:%M:%S))"; sleep 60
done

# train the folders among the lines of a score.py step's output (the step prints what it wrote)
train_listed() {
  local listed=$1 folders=()
  shift
  while read -r line; do
    if [ -n "$line" ] && [ -f "$here/$line/configs.py" ]; then folders+=("$line"); fi
  done <<< "$listed"
  if [ ${#folders[@]} -gt 0 ]; then bash "$here/run_block.sh" "${folders[@]}" "$@"; fi
}

bash "$here/run_block.sh" 2 "$@"
echo "== compose $(date -u +%H:%M:%S)"
out=$($py "$here/score.py" --compose); echo "$out"
train_listed "$(for c in c1 c2; do [ -f "$here/$c/configs.py" ] && echo "$c"; done)" "$@"
echo "== close call $(date -u +%H:%M:%S)"
if out=$($py "$here/score.py" --close-call 2>&1); then
  echo "$out"; train_listed "$out" "$@"
else
  echo "$out"  # "no close call" is an outcome; anything else stops here
  grep -q "no close call" <<< "$out" || exit 1
fi
echo "== tables $(date -u +%H:%M:%S)"
out=$($py "$here/score.py" --tables); echo "$out"
train_listed "$out" "$@"
$py "$here/score.py" > /dev/null
echo "== done $(date -u +%H:%M:%S): scores.md written; next: score.py --plateau <the final choice> (scores.md names it)"
