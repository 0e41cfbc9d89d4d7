#!/usr/bin/env bash
# The formation study's runs (DESIGN.md): train a set with its snapshots, then measure its
# timelines. Resumable: stop it any time, run it again (trained runs are not trained again).
#
#   bash experiments/formation/run.sh discovery [-w WORKERS]   # train, then measure -> discovery/timeline.*
#   bash experiments/formation/run.sh held-out [-w WORKERS]
#
# Refuses when interp/ differs from the pinned commit (DESIGN.md section 6: the last commit to
# touch DESIGN.md). Each set's store is <set>/results/store.sqlite; its rows without checkpoints
# go to <set>/store-rows.sqlite (commit it with the timeline).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/formation
case "${1:-}" in discovery|held-out) set_=$1 ;; *) echo "usage: run.sh discovery|held-out [-w WORKERS]" >&2; exit 2 ;; esac
workers=2
if [ "${2:-}" = -w ]; then workers=${3:?-w needs a number}; fi
pin=$(git log -1 --format=%H -- $here/DESIGN.md)
if ! git diff --quiet "$pin" -- interp/; then
  echo "interp/ differs from the pinned commit ${pin:0:12} (DESIGN.md section 6): amend DESIGN.md first" >&2; exit 1
fi
stamp() { echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) code $(git rev-parse --short=12 HEAD) pin ${pin:0:12}"; }
echo "== train $set_ $(stamp)"
.venv/bin/interp sweep "$here/$set_" --snapshots 50:1000:500 --workers "$workers"
echo "== measure $set_ $(stamp)"
.venv/bin/interp timeline "$here/$set_" --out "$here/$set_"
env -u PYTHONPATH .venv/bin/interp store rows "$here/$set_/results/store.sqlite" "$here/$set_/store-rows.sqlite"
echo "== done $set_ $(stamp)"
