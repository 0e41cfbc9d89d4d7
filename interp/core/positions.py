"""A presentation's position facts, checked against its own tokens before anything reads them.

A layout (:mod:`interp.core.layouts`) says where its tokens sit: :meth:`~interp.core.layouts.Layout.query_pos`
(the target key i*; the paper's five put it last, a presentation may move it),
:meth:`~interp.core.layouts.Layout.value_pos` and :meth:`~interp.core.layouts.Layout.key_pos`
(slot j), and :meth:`~interp.core.layouts.Layout.answer_pos` (where the answer is read: the final
position, for every presentation). Every reader takes them from there: the input check and the
tokenizer (:mod:`interp.core.tokens`), both engines (the fast engine's data and its captured
step), probes, interchange inputs and views. :func:`check_layout` holds a layout to what it says,
so :func:`interp.core.tasks.register` refuses a layout the readers would misread, by name, before
a model is built or a batch drawn.
"""

from __future__ import annotations

from typing import Sequence

import torch


def check_layout(layout, sizes: Sequence[int] = (3, 5)) -> None:
    """A ValueError naming the method and the position unless ``layout``'s tokens (of one table of
    each size in ``sizes``) are where its position methods say: the answer read at the final
    position; tokens of shape ``(1, seq_len(n))``; the query token of i* at ``query_pos`` (no
    slot's key or value there); slot j's value (its pair token) at ``value_pos``, its key at
    ``key_pos``; ``split`` reading the table back."""
    for n in sizes:
        keys = torch.arange(n).roll(1)[None] if layout.permuted else torch.arange(n)[None]
        values, target = ((torch.arange(n) * 2 + 1) % n)[None], torch.tensor([n - 1])
        where = f"{type(layout).__qualname__} (case {layout.case}) with n={n}"
        last = layout.seq_len(n) - 1
        if layout.answer_pos(n) != last:
            raise ValueError(f"{where}: answer_pos(n)={layout.answer_pos(n)}; accepted: the final position {last} "
                             "(every engine, the evaluation pass and the loss read logits[:, -1])")
        tokens = layout.layout(n, keys, values, target)
        if tuple(tokens.shape) != (1, last + 1):
            raise ValueError(f"{where}: layout() gives tokens of shape {tuple(tokens.shape)}; accepted: "
                             f"(batch, seq_len(n)) = (1, {last + 1})")
        _check_query(layout, n, where, tokens, target)
        _check_slots(layout, n, where, tokens, keys, values, target)


def _check_query(layout, n: int, where: str, tokens, target) -> None:
    q, query = layout.query_pos(n), int(layout.query_token(n, target)[0])
    kp = layout.key_positions(n)
    slots = set(layout.value_positions(n).tolist()) | (set() if kp is None else set(kp.tolist()))
    if not 0 <= q < tokens.shape[1] or int(tokens[0, q]) != query or q in slots:
        found = [p for p in range(tokens.shape[1]) if p not in slots and int(tokens[0, p]) == query]
        raise ValueError(f"{where}: query_pos(n)={q}, but layout() puts the query token {query} at position "
                         f"{found[0] if found else '(none)'}; accepted: the position of the query token, which no "
                         "slot's key or value holds (override query_pos)")


def _check_slots(layout, n: int, where: str, tokens, keys, values, target) -> None:
    want = keys * n + values if layout.same_position else values
    vp = layout.value_positions(n)
    if not torch.equal(tokens[0, vp], want[0]):
        raise ValueError(f"{where}: value_positions(n)={vp.tolist()} hold {tokens[0, vp].tolist()}, not the "
                         f"{'pair tokens' if layout.same_position else 'values'} {want[0].tolist()}; accepted: "
                         "where layout() puts them")
    kp = layout.key_positions(n)
    if kp is not None and not layout.same_position and not torch.equal(tokens[0, kp], keys[0]):
        raise ValueError(f"{where}: key_positions(n)={kp.tolist()} hold {tokens[0, kp].tolist()}, not the "
                         f"keys {keys[0].tolist()}; accepted: where layout() puts them")
    back = layout.split(n, tokens)
    if not all(torch.equal(a, b) for a, b in zip(back, (keys, values, target))):
        raise ValueError(f"{where}: split() does not read back the table layout() wrote; accepted: its inverse")
