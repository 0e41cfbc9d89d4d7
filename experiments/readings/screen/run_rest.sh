#!/usr/bin/env bash
# Issue 28's screen from block 2 to the held-out confirmation, unattended, each step as DESIGN.md
# (sections 3 and 6) declares it and score.py's decision code writes it:
#   1. block 2 (run_block.sh 2), the folders with runs left to train;
#   2. the composed combinations: score.py --compose writes c1 (and c2 where block M calls for
#      it), then they train (a composed copy of a candidate trains nothing: its runs are recorded,
#      and score.py gives each combination every committed row of its runs, by run name);
#   3. the close call: score.py --close-call writes <name>-s59 for the top two when their W is
#      within 2 (or says there is none), then they train;
#   4. the confirmation: score.py --tables writes both full tables of the choice, of the retrained
#      mlp-4x and, after a close call, of the runner-up, then they train (the held-out cells, and
#      the screening cells again where the store lacks them: trained twice, compared in scores.md).
# Before each score.py step it checks that this checkout's interp names every run of the study as
# the pinned interp that trains them does (score.py reads the store by run name).
# Every step is resumable (a rerun trains only folders with a run recorded nowhere: score.py
# --incomplete; the sweep of such a folder trains all its runs the store lacks), and the chain
# waits for a run_block.sh already running, so it can follow one.
# Nothing is committed: commit each folder's report (and score.py's scores.md and seeds.csv, and
# run_block.sh's store-snapshot.sqlite) as it lands. Usage: run_rest.sh [-w WORKERS]
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

# train the folders among the lines of a score.py step's output (the step prints what it wrote),
# leaving out those whose runs are all recorded (score.py --incomplete: in the committed seeds.csv or
# the store; a fresh checkout has no store and must not train again what is committed)
train_listed() {
  local listed=$1 folders=() left
  shift
  while read -r line; do
    if [ -n "$line" ] && [ -f "$here/$line/configs.py" ]; then folders+=("$line"); fi
  done <<< "$listed"
  [ ${#folders[@]} -gt 0 ] || return 0
  left=$($py "$here/score.py" --incomplete "${folders[@]}")
  if [ -n "$left" ]; then bash "$here/run_block.sh" $left "$@"; fi
}

# score.py names runs with this checkout's interp, run_block.sh trains with the pinned one: the
# names of every run the study can declare must agree, or stored runs would read as missing
pinned="${TMPDIR:-/tmp}/interp-screen-$(sed -n 's/^PIN=\(.\{12\}\).*/\1/p' "$here/run_block.sh")"
names() {
  PYTHONPATH="$1" $py -P - <<'PY'
import hashlib, sys
sys.path.insert(0, "experiments/readings/screen")
import design, score
h = hashlib.sha256()
for name in score.names():
    for seeds in (design.SEEDS, design.CLOSE_CALL_SEEDS):
        for c in design.configs(name, cells=design.SCREENING + design.held_out(), seeds=seeds):
            h.update(c.name().encode())
print(h.hexdigest())
PY
}
same_names() {
  [ -d "$pinned/interp" ] || { echo "no pinned worktree at $pinned (run_block.sh --prepare makes it); stopped" >&2; return 1; }
  [ "$(names "")" = "$(names "$pinned")" ] && return 0
  echo "run names under this checkout's interp differ from the pinned one's ($pinned): score.py would" \
       "misread the store; stopped" >&2
  return 1
}

bash "$here/run_block.sh" --prepare  # the pinned worktree, which same_names reads
same_names
train_listed "$(printf '%s\n' f09 f10 f11 f12 f13 f14 f15 f16 m-last-2048)" "$@"  # block 2 (run_block.sh 2)
echo "== compose $(date -u +%H:%M:%S)"
out=$($py "$here/score.py" --compose); echo "$out"
train_listed "$(sed -n 's/^\(c[12]\): [-+].*/\1/p' <<< "$out")" "$@"  # what compose wrote, not a folder left over
same_names
echo "== close call $(date -u +%H:%M:%S)"
if out=$($py "$here/score.py" --close-call 2>&1); then
  echo "$out"; train_listed "$out" "$@"
else
  echo "$out"  # "no close call" is an outcome; anything else stops here
  grep -q "no close call" <<< "$out" || exit 1
fi
same_names
echo "== tables $(date -u +%H:%M:%S)"
out=$($py "$here/score.py" --tables); echo "$out"
train_listed "$out" "$@"
$py "$here/score.py" > /dev/null
echo "== done $(date -u +%H:%M:%S): scores.md written; its 'Decision' line says whether the choice is final" \
     "(then score.py --plateau NAME) or what it still waits for"
