"""Memory placement changes no value: huge pages for large tensors (``THP_MEM_ALLOC_ENABLE``)
and glibc keeping freed memory (:func:`interp.training.machine.keep_freed_memory`), both of which
``interp``'s CLI turns on. A two-layer group with a 2048-wide MLP (hidden activations tens of MB
per tensor, far over the 2 MB huge-page threshold and glibc's 32 MB mmap threshold) trains to the
same bits with and without them, under the MKL mode the CLI sets; and each really takes effect
(far fewer page faults in three training steps).

Independent reference: the same training in a process with neither. Huge pages need a process
of their own (torch reads the variable once, at its first allocation); glibc's setting can be
turned on mid-process, so the huge-pages process trains the group a second time after turning it
on: two subprocesses give the three sides.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import hashlib, resource, sys, torch
from interp.training import fast_train, machine
from interp.training.trainer import TrainConfig
torch.set_num_threads(1)
configs = [TrainConfig(case=5, n=10, d_token=16, pos_embed="learned", n_layers=2, d_mlp=2048,
                       seed=s, max_steps=4, stop_loss=0.0, eval_batches=1) for s in (0, 1)]

def side():
    ens = fast_train.Ensemble(configs)
    ens.step()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    while not ens.done:
        ens.step()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    digest = hashlib.sha256()
    for m in ens.models:
        for p in m.parameters():
            digest.update(p.detach().numpy().tobytes())
    return digest.hexdigest(), repr(ens.last), faults

print(*side(), False, sep="|")
if sys.argv[1] == "then-keep":  # the same training again, glibc now keeping freed memory
    kept = machine.keep_freed_memory()
    print(*side(), kept, sep="|")
"""


def _train(thp: str, then_keep: bool) -> list[dict]:
    """One side per line the script prints: its bits, page faults, and whether glibc kept
    freed memory."""
    env = {**os.environ, "MKL_CBWR": "AUTO", "THP_MEM_ALLOC_ENABLE": thp}
    out = subprocess.run([sys.executable, "-c", SCRIPT, "then-keep" if then_keep else "once"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    sides = []
    for line in out.stdout.strip().splitlines():
        digest, losses, faults, kept = line.split("|")
        sides.append(dict(bits=(digest, losses), faults=int(faults), kept=kept == "True"))
    return sides


def _thp_possible() -> bool:
    p = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return p.is_file() and "[never]" not in p.read_text()


@pytest.fixture(scope="module")
def sides() -> dict:
    (plain,) = _train("0", then_keep=False)
    huge, both = _train("1", then_keep=True)
    return {"plain": plain, "huge": huge, "both": both}


def test_memory_placement_changes_no_bits(sides):
    plain = sides["plain"]["bits"]  # every parameter and every seed's last loss
    assert sides["huge"]["bits"] == plain and sides["both"]["bits"] == plain


def test_huge_pages_take_effect(sides):
    if not _thp_possible():
        pytest.skip("the kernel grants no transparent huge pages (enabled: never)")
    # three steps' minor page faults: a 2 MB page is one fault where 4 kB pages are 512
    # (measured here: 333,000 without, 28,000 with)
    assert sides["huge"]["faults"] * 4 < sides["plain"]["faults"], sides


def test_keeping_freed_memory_takes_effect(sides):
    if not sides["both"]["kept"]:
        pytest.skip("not glibc: keep_freed_memory does nothing here")
    # the large temporaries reuse the heap instead of fresh maps (measured: 28,000 -> 1,400)
    assert sides["both"]["faults"] * 5 < sides["huge"]["faults"], sides
