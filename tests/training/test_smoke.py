"""The fast tier's training check (``make test-fast``): 50 steps of the fast engine follow the
plain TransformerLens loop (``engine="reference"``, TransformerLens's own forward and backward),
step for step, and learn something."""

import torch

from interp.training import TrainConfig, train


def test_50_steps_of_the_fast_engine_follow_transformer_lens():
    config = TrainConfig(case=5, n=4, d_token=8, n_layers=2, d_mlp=16, pos_embed="learned",
                         lr=0.01, max_steps=50, stop_loss=0.0, curve_every=1, eval_batches=1,
                         batch_size=32, seed=3)
    fast, plain = train(config), train(config, engine="reference")
    assert fast.steps == plain.steps == 50
    torch.testing.assert_close(torch.tensor([v for _, v in fast.curve]),
                               torch.tensor([v for _, v in plain.curve]), atol=1e-4, rtol=0)
    for (name, p), q in zip(fast.model.named_parameters(), plain.model.parameters(), strict=True):
        if not name.endswith("b_K"):  # exact gradient 0 (softmax-invariant): the plain loop's
            torch.testing.assert_close(p, q, atol=1e-3, rtol=0, msg=name)  # rounding noise walks it
    assert fast.curve[-1][1] < fast.curve[0][1]  # it learns: the loss fell over the 50 steps
