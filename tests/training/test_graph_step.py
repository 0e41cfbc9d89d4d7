"""The captured-step ensemble (interp.training.fast_graph) against the plain fast ensemble.

On the CPU the step runs eagerly with the same static buffers, device-side stopping flags and
every-k reads as under a CUDA graph; it must give the plain ensemble's results: bit for bit
where seeds are stacked exactly (MKL_CBWR, in a subprocess), to float rounding otherwise.
The CUDA tests (capture, replay) skip where there is no GPU.
"""

import os
import subprocess
import sys

import pytest
import torch

from interp.training import fast_train as ft
from interp.training.fast_graph import GraphEnsemble
from interp.training.trainer import TrainConfig, init_model, one_thread

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the "
                          "captured step is checked on the CPU (eager) only")

#: groups whose seeds stop at different steps, with and without MLPs, pair tables, no PE, spec choices
GROUPS = dict(
    pairs_stop=TrainConfig(case=2, n=3, d_token=4, lr=0.01, max_steps=120, stop_loss=0.1,
                           eval_batches=2, batch_size=64),
    two_mlp=TrainConfig(case=5, n=4, d_token=6, n_layers=2, d_mlp=12, max_steps=60, stop_loss=0.3,
                        lr=0.01, eval_batches=1, batch_size=32),
    no_pe=TrainConfig(case=3, n=4, d_token=3, pos_embed="none", max_steps=77, stop_loss=0.2,
                      lr=0.02, eval_batches=1, batch_size=32),
    spec=TrainConfig(case=5, n=4, d_token=6, n_layers=2, d_mlp=12, mlp="last", residual="embed",
                     attn_bias=False, W_O="identity", init="mha", max_steps=30, eval_batches=1,
                     batch_size=32),
    screen=TrainConfig(case=3, n=4, d_token=3, key_order="batch", pos_init="zero", embed_scale="sqrt_d_model",
                       max_steps=200, stop_loss=0.2, lr=0.05, eval_batches=1, batch_size=32),
    concat=TrainConfig(case=1, n=4, d_token=3, pe_combine="concat", init="pytorch", max_steps=90, stop_loss=0.3,
                       lr=0.02, eval_batches=1, batch_size=32),  # the zero blocks' masks in the captured step
)


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


def _run(ens):
    while not ens.done:
        ens.advance() if isinstance(ens, GraphEnsemble) else ens.step()
    return ens.results()


def _assert_same(a, b, exact: bool):
    assert (a.steps, a.status) == (b.steps, b.status)
    assert [s for s, _ in a.curve] == [s for s, _ in b.curve]
    if exact:
        assert (a.curve, a.final_loss, a.accuracy) == (b.curve, b.final_loss, b.accuracy)
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        if exact:
            assert torch.equal(p, q), name
        else:  # training amplifies the last bits: at lr 0.05 over 170 steps, seed 1 of "screen" ends
            # 2.4e-4 apart on an AMD EPYC (within 1e-5 on an Intel Xeon); a wrong step moves
            # parameters by O(0.1), so 1e-3 still separates rounding from a bug
            torch.testing.assert_close(p, q, atol=1e-3, rtol=0, msg=name)


@pytest.mark.parametrize("group", list(GROUPS))
def test_graph_step_equals_the_plain_ensemble_to_float_rounding(group):
    configs = [GROUPS[group].replace(seed=s) for s in range(4)]
    plain = _run(ft.Ensemble(configs))
    graph = _run(GraphEnsemble(configs, check_every=7))  # 7 divides no max_steps here
    for a, b in zip(plain, graph, strict=True):
        _assert_same(a, b, exact=False)
    if group != "spec":
        assert len({r.steps for r in plain}) > 1 or group == "two_mlp"


def test_graph_step_is_bit_for_bit_the_plain_ensemble_when_stacking_is_exact():
    """Under MKL_CBWR (subprocess): every group, k = 1, 7 and 50; the warm-up a capture runs
    first leaves no trace, nor does a failed capture; drawing ahead (CUDA's schedule) changes
    nothing; a group saved and resumed half way (in either engine, saved while a block was
    drawn ahead) ends as the uninterrupted one."""
    if not torch.backends.mkl.is_available():
        pytest.skip("torch has no MKL here: seeds are stacked exactly only under MKL_CBWR")
    code = f"""
import tempfile, os, torch
torch.set_num_threads(1)
from interp.training import fast_train as ft
from interp.training.fast_graph import GraphEnsemble
from tests.training.test_graph_step import GROUPS, _run, _assert_same
assert ft.mkl_reproducible()
for name, base in GROUPS.items():
    cs = [base.replace(seed=s) for s in range(4)]
    plain = _run(ft.Ensemble(cs))
    for k in (1, 7, 50):
        for a, b in zip(plain, _run(GraphEnsemble(cs, check_every=k)), strict=True):
            _assert_same(a, b, exact=True)
    g = GraphEnsemble(cs, check_every=5)
    g.advance()
    g.warm_up()  # what a capture runs first: it must change nothing
    for a, b in zip(plain, _run(g), strict=True):
        _assert_same(a, b, exact=True)
    g = GraphEnsemble(cs, check_every=6, draw_ahead=True)  # CUDA's schedule, on the CPU
    g.capture = True  # capturing fails without CUDA: the state is put back, the step runs eagerly
    for a, b in zip(plain, _run(g), strict=True):
        _assert_same(a, b, exact=True)
    assert g.graph is None and not g.capture
    for first, then, ahead in ((True, True, False), (True, False, True), (False, True, False)):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "group.safetensors")
            calls = []
            def stop(step, losses):
                calls.append(step)
                if step == 21:
                    raise KeyboardInterrupt
            real = GraphEnsemble.__init__
            def init(self, *a, **kw):  # the CUDA schedule (drawing ahead) on the CPU
                real(self, *a, **dict(kw, draw_ahead=ahead))
            GraphEnsemble.__init__ = init
            try:
                ft.train_ensemble(cs, progress=path, every=0, on_step=stop, graph=first, check_every=5)
            except KeyboardInterrupt:
                pass
            finally:
                GraphEnsemble.__init__ = real
            assert os.path.exists(path) and calls == list(range(1, 22))
            for a, b in zip(plain, ft.train_ensemble(cs, progress=path, graph=then), strict=True):
                _assert_same(a, b, exact=True)
print("ok")
"""
    env = dict(os.environ, MKL_CBWR="AUTO", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_non_finite_loss_stops_only_that_seed_and_leaves_it_untouched():
    configs = [TrainConfig(case=1, n=4, d_token=2, seed=s, max_steps=9, stop_loss=0.0,
                           eval_batches=1, batch_size=16) for s in range(2)]
    models = [init_model(c) for c in configs]
    with torch.no_grad():
        models[0].unembed.b_U[0] = float("nan")
    before = [p.detach().clone() for p in models[0].parameters()]
    ens = GraphEnsemble(configs, models_=models, check_every=4)
    bad, good = _run(ens)
    assert bad.status.startswith("failed: non-finite loss (nan) at step 1") and bad.steps == 0
    assert good.status == "ok" and good.steps == 9
    assert ens.stop_step.tolist() == [1, 0]
    for p, q in zip(bad.model.parameters(), before, strict=True):
        assert torch.equal(p.isnan(), q.isnan()) and torch.equal(p.nan_to_num(), q.nan_to_num())


def test_the_device_records_the_exact_first_step_below_stop_loss():
    configs = [GROUPS["pairs_stop"].replace(seed=s) for s in range(4)]
    ens = GraphEnsemble(configs, check_every=16)
    results = _run(ens)
    for s, r in enumerate(results):
        if r.steps < r.config.max_steps:  # stopped early: at its first loss below stop_loss
            assert ens.stop_step[s] == r.steps and r.curve[-1] == (r.steps, r.final_loss)
            assert r.final_loss < r.config.stop_loss
            assert all(v >= r.config.stop_loss for _, v in r.curve[:-1])
        else:
            assert ens.stop_step[s] == 0
    assert any(r.steps < r.config.max_steps for r in results)


def test_train_ensemble_calls_on_step_for_every_step_in_order():
    configs = [GROUPS["pairs_stop"].replace(seed=s, max_steps=40, stop_loss=0.6) for s in range(3)]
    seen = {True: [], False: []}
    for graph in seen:
        ft.train_ensemble(configs, on_step=lambda step, losses, g=graph: seen[g].append(
            (step, sorted(losses))), graph=graph, check_every=6)
    assert [s for s, _ in seen[True]] == [s for s, _ in seen[False]]
    assert [k for _, k in seen[True]] == [k for _, k in seen[False]]


@pytest.mark.parametrize("kw, match", [
    (dict(check_every=0), r"check_every=0; accepted: an integer >= 1"),
    (dict(check_every=2.5), r"check_every=2.5; accepted"),
    (dict(capture=True), r"capture=True needs a CUDA device"),
])
def test_refuses_bad_options_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        GraphEnsemble([GROUPS["no_pe"]], **kw)


def test_step_is_refused_in_favour_of_advance():
    with pytest.raises(TypeError, match="advance"):
        GraphEnsemble([GROUPS["no_pe"]]).step()


@cuda
@pytest.mark.parametrize("group", ["pairs_stop", "two_mlp", "spec"])
def test_captured_step_on_cuda_equals_the_cpu_ensemble(group):
    configs = [GROUPS[group].replace(seed=s) for s in range(4)]
    cpu = _run(ft.Ensemble(configs))
    ens = GraphEnsemble(configs, device="cuda", check_every=7)
    gpu = _run(ens)
    assert ens.graph is not None, "the step was not captured (see the warning logged)"
    for a, b in zip(cpu, gpu, strict=True):
        assert (a.steps, a.status) == (b.steps, b.status)
        for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
            torch.testing.assert_close(p, q, atol=1e-4, rtol=0)


@cuda
def test_train_group_on_cuda_uses_the_captured_step():
    from interp.training.trainer import train_group

    configs = [GROUPS["two_mlp"].replace(seed=s) for s in range(2)]
    on_cpu, on_gpu = train_group(configs), train_group(configs, device="cuda")
    for a, b in zip(on_cpu, on_gpu, strict=True):
        assert a.steps == b.steps and abs(a.accuracy - b.accuracy) <= 0.02
