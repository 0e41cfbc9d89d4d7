#!/usr/bin/env bash
# The screen's 50 runs (../SCREEN-pe.md), trained by the code the screen pins (PIN below): a
# temporary git worktree at PIN supplies `interp`, this folder supplies the configs. One worker
# on one thread. Resumable: a rerun trains only the runs the store lacks. Afterwards the store's
# rows go to store-rows.sqlite (committed); the log line has wall, user and sys seconds and the
# load at the start. Run it as
#   nohup experiments/paper-check/screen-pe/run.sh >> experiments/paper-check/screen-pe/run.log 2>&1 &
set -euo pipefail
PIN=7dc0959
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
wt=$(mktemp -d)
git worktree add -q --detach "$wt" "$PIN"
trap 'git worktree remove --force "$wt"' EXIT
store="$here/results/store.sqlite"
echo "== screen-pe start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) code $PIN"
PYTHONPATH="$wt" /usr/bin/time -f "== screen-pe end: %e s wall, %U s user, %S s sys" \
  .venv/bin/python -c "import sys; from interp.cli import main; sys.exit(main())" \
  sweep "$here" --store "$store" --workers 1 --threads 1 --save-every 120
.venv/bin/interp store rows "$store" "$here/store-rows.sqlite"
echo "== screen-pe rows copied $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
