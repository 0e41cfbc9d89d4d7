"""Huge pages for large tensors (``THP_MEM_ALLOC_ENABLE``, which ``interp``'s CLI sets) change
where torch's allocator puts memory, never a value: a two-layer group with a 2048-wide MLP (its
hidden activations tens of MB per tensor, far over the 2 MB threshold) trains to the same bits
with and without them, under the MKL mode the CLI sets.

Independent reference: the same training in a process without huge pages. Each side runs in
its own subprocess because torch reads the variable once, at its first allocation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import hashlib, torch
from interp.training import fast_train
from interp.training.trainer import TrainConfig
torch.set_num_threads(1)
configs = [TrainConfig(case=5, n=10, d_token=16, pos_embed="learned", n_layers=2, d_mlp=2048,
                       seed=s, max_steps=3, stop_loss=0.0, eval_batches=1) for s in (0, 1)]
ens = fast_train.Ensemble(configs)
huge = 0
while not ens.done:
    ens.step()
    with open("/proc/self/smaps_rollup") as f:
        line = next(l for l in f if l.startswith("AnonHugePages:"))
    huge = max(huge, int(line.split()[1]))
digest = hashlib.sha256()
for m in ens.models:
    for p in m.parameters():
        digest.update(p.detach().numpy().tobytes())
print(digest.hexdigest(), ens.last, huge)
"""


def _train(thp: str) -> tuple[str, str, int]:
    env = {**os.environ, "MKL_CBWR": "AUTO", "THP_MEM_ALLOC_ENABLE": thp}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    digest, rest = out.stdout.split(" ", 1)
    losses, huge = rest.rsplit(" ", 1)
    return digest, losses, int(huge)


def test_huge_pages_change_no_bits():
    plain, huge = _train("0"), _train("1")
    assert plain[:2] == huge[:2]  # every parameter and every seed's last loss, bit for bit
    if _thp_possible():  # the kernel grants them: the variable really took effect (kB)
        assert huge[2] >= plain[2] + 8192, (plain[2], huge[2])  # 4+ more 2 MB pages live


def _thp_possible() -> bool:
    p = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return p.is_file() and "[never]" not in p.read_text()
