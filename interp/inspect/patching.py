"""Activation patching: is the answer carried by the position the construction attends?

For each clean input we make a corrupted one with the same keys and target but a different
answer: the value of the target's slot is swapped with the value of another slot (so the table
stays a permutation when it was one). Then, with TransformerLens hooks, we run the clean input
and overwrite one activation with the corrupted run's:

* **attended**: the activation at the attended position only (the slot with k_j = i*). If the
  answer is read from there, the prediction follows the corrupted answer.
* **control**: the activation at every *other* slot position (all but the attended position and
  the final position). If the answer is read from the attended position only, the prediction
  stays the clean answer, although the corrupted run changed the swapped slot.

The patched activation is ``blocks.L.hook_resid_pre`` (``hook="resid_pre"``: everything the
last layer L reads at that position) or ``blocks.L.attn.hook_v`` (``hook="v"``: only the value
vector, so the attention pattern is left clean). For case 5 with two layers, L = 1 reads the
value position 2j + 1 after layer 0 has copied the key there; keys are equal in both runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from interp.core import tasks
from interp.inspect import hooks

HOOKS = {"resid_pre": "blocks.{L}.hook_resid_pre", "v": "blocks.{L}.attn.hook_v"}


def corrupt(case: int, n: int, tokens, *, seed: int = 0) -> Int[Tensor, "batch pos"]:
    """Same keys and target, the target slot's value swapped with a random other slot's."""
    view = hooks.read(case, n, tokens)
    if n < 2:
        raise ValueError(f"n={n}: corrupting needs two slots (n >= 2)")
    g = torch.Generator().manual_seed(seed)
    batch = view.tokens.shape[0]
    j = view.slot_of_target
    other = (j + torch.randint(1, n, (batch,), generator=g)) % n  # a slot != j
    values = view.values.clone()
    rows = torch.arange(batch)
    values[rows, j], values[rows, other] = view.values[rows, other], view.values[rows, j]
    return tasks.encode(case, view.keys if case in tasks.PERMUTED else None, values, view.target)


@dataclass(frozen=True)
class PatchingResult:
    """Fractions over the batch (predictions are ``logits[:, -1].argmax``)."""

    hook_name: str
    clean_acc: float  # clean prediction == clean answer
    corrupt_acc: float  # corrupted prediction == corrupted answer
    follow: float  # attended position patched: prediction == corrupted answer
    control_keep: float  # every other slot patched: prediction == clean answer
    changed: float  # fraction of inputs whose corrupted answer differs (1.0 unless values tie)

    def summary(self) -> dict:
        return dict(hook=self.hook_name, clean_acc=self.clean_acc, corrupt_acc=self.corrupt_acc,
                    follow=self.follow, control_keep=self.control_keep)


def _patch(model, tokens, source: Tensor, name: str, positions: Tensor) -> Tensor:
    """Run ``tokens`` with ``name`` at [batch, positions] (a bool mask) taken from ``source``."""

    def hook(act, hook):
        act = act.clone()
        act[positions] = source[positions].to(act.dtype)
        return act

    with torch.no_grad():
        return model.run_with_hooks(tokens, fwd_hooks=[(name, hook)])[:, -1].argmax(-1)


def patch_attended(
    model, case: int, n: int, tokens=None, *, hook: str = "resid_pre", batch_size: int = 512,
    seed: int = 0, at: str = "value",
) -> PatchingResult:
    """Patch the attended position (and, as a control, the other slots) from corrupted runs.

    ``at="key"`` (cases 4-5) patches the matching slot's key position 2j instead of its value
    position 2j + 1, and the other slots' key positions as the control: the check for a
    two-layer model that reads the answer at the key position (the "mirror" mechanism)."""
    hooks.check_model(model, case, n)
    slot_pos = hooks.slot_positions_at(case, n, at)
    if hook not in HOOKS:
        raise ValueError(f"hook={hook!r}; accepted: one of {tuple(HOOKS)}")
    name = HOOKS[hook].format(L=model.cfg.n_layers - 1)
    tokens = hooks.sample_inputs(case, n, batch_size, seed=seed) if tokens is None else tokens
    clean = hooks.read(case, n, tokens)
    bad = hooks.read(case, n, corrupt(case, n, clean.tokens, seed=seed + 1))
    with torch.no_grad():
        _, cache = model.run_with_cache(bad.tokens, names_filter=lambda x: x == name)
    source = cache[name]
    batch, pos = clean.tokens.shape
    rows = torch.arange(batch)
    attended = torch.zeros(batch, pos, dtype=torch.bool)
    attended[rows, slot_pos[clean.slot_of_target]] = True
    others = torch.zeros(batch, pos, dtype=torch.bool)
    others[:, slot_pos] = True
    others &= ~attended
    clean_pred = hooks.predictions(model, clean.tokens)
    bad_pred = hooks.predictions(model, bad.tokens)
    follow = _patch(model, clean.tokens, source, name, attended)
    control = _patch(model, clean.tokens, source, name, others)

    def frac(x: Tensor) -> float:
        return float(x.float().mean())

    return PatchingResult(
        hook_name=name,
        clean_acc=frac(clean_pred == clean.answer),
        corrupt_acc=frac(bad_pred == bad.answer),
        follow=frac(follow == bad.answer),
        control_keep=frac(control == clean.answer),
        changed=frac(bad.answer != clean.answer),
    )
