#!/usr/bin/env bash
# Issue 53's extra seeds (DESIGN.md): the stage folders in stages.ORDER, one worker on one thread
# (one core stays free), rows only (--no-checkpoints: the check reads accuracies, never a model).
# Resumable: a rerun trains only the runs the store lacks. After each folder the store's rows are
# copied to store-rows.sqlite (committed). Each folder's wall, user and sys seconds and the load
# at its start go to stdout; run it as
#   nohup experiments/paper-check/run.sh >> experiments/paper-check/run.log 2>&1 &
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
store=experiments/paper-check/results/store.sqlite
rows=experiments/paper-check/store-rows.sqlite
names=$(.venv/bin/python -c "import sys; sys.path.insert(0, 'experiments/paper-check'); import stages; print(' '.join(stages.ORDER))")
echo "== run.sh start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) code $(git rev-parse --short=12 HEAD)"
for name in $names; do
  echo "== $name start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "== $name end: %e s wall, %U s user, %S s sys" \
    .venv/bin/interp sweep "experiments/paper-check/$name" --store "$store" --workers 1 --threads 1 \
      --no-checkpoints --save-every 120
  .venv/bin/interp store rows "$store" "$rows"
  echo "== $name rows copied $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "== run.sh done $(date -u +%FT%TZ)"
