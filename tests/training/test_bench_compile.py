"""experiments/bench/compile_cpu.py: its dense formulation is TransformerLens's model, so the
benchmark compares engines that compute the same loss and gradients."""

import os
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "experiments" / "bench"))
_env = {k: os.environ.get(k) for k in ("MKL_CBWR", "THP_MEM_ALLOC_ENABLE", "TORCHINDUCTOR_FORCE_DISABLE_CACHES")}
import compile_cpu  # noqa: E402  (sets benchmark-process variables; put back for the test session)

for _k, _v in _env.items():
    if _v is None:
        os.environ.pop(_k, None)
    else:
        os.environ[_k] = _v


def test_dense_losses_and_gradients_are_transformerlens_per_seed():
    eng = compile_cpu.Engines(seeds=2, batch_size=8)
    want = torch.stack([F.cross_entropy(m(eng.tokens[s])[:, -1], eng.answers[s]) for s, m in enumerate(eng.models)])
    p = compile_cpu.stack_params(eng.models)
    layers = [[w[k] for k in compile_cpu.LAYER] for w in p["layers"]]
    got = compile_cpu.dense_losses(p["T"], p["pos"], layers, p["W_U"], p["b_U"], eng.tokens, eng.answers,
                                   p["scale"][0], p["scale"][1])
    torch.testing.assert_close(got, want.detach(), rtol=0, atol=1e-6)
    ref, dense = eng.grads(eng.plain), eng.grads(eng.dense)
    assert len(ref) == len(dense) == 2 * len(list(p for p in eng.models[0].parameters() if p.requires_grad))
    for a, b in zip(dense, ref):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    assert any(g.abs().max() > 0 for g in ref[:4])  # the gradients compared are not all zero
