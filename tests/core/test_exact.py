"""Exact on every CPU: the constructions' answers do not depend on a kernel's summation order.

* Every construction at every n of ``interp verify``'s plan (n = 1000 included), both function
  kinds: TransformerLens's forward, ``interp.core.forward`` and both trainers' evaluation give the
  plain-Python reference's answer on every input.
* Ties perturbed on purpose: a hook moves the query's own score or the matching slot's score by
  +-k ulps, k up to the tie tolerance; the answer stays right. Scores further apart than the
  tolerance are not merged.
* Other CPUs, simulated: the tests above run again in subprocesses under each MKL code path
  (``MKL_CBWR``) that MKL accepts on this CPU; the ones it refuses are skipped, saying so.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.core import attention, constructions, forward, tasks, verify
from interp.inspect.tools import hooks
from interp.training import fast_train, trainer as training

PLAN_NS = sorted({row["n"] for row in verify.default_plan()})  # 2, 3, 4, 100, 1000
RANDOM_INPUTS = {100: 256, 1000: 48}


def n_id(n: int) -> str:
    """A size's test id, ``n1000``: ``-k "not n1000"`` deselects a size everywhere, the MKL
    child runs below included (they are parametrised by the size they run)."""
    return f"n{n}"


def _tl_chunk(tokens) -> int:
    """Inputs per TransformerLens forward: its [batch, pos, pos] scores near 2**22 floats (16
    MB; one input at n = 1000 with 2001 positions, four with 1001). Measured on one thread:
    1.9x faster than 16 inputs at a time for cases 4-5 at n = 1000, 1.2x for cases 2-3."""
    return max(1, 2**22 // tokens.shape[1] ** 2)


def _inputs(case: int, n: int, function: str):
    if n <= 4:
        tokens, _ = tasks.enumerate_inputs(case, n, function)
        return tokens
    g = torch.Generator().manual_seed(1000 * case + n)
    tokens, _ = tasks.sample(case, n, RANDOM_INPUTS[n], generator=g, function=function)
    return tokens


def _tl_predictions(model, tokens) -> torch.Tensor:
    with torch.inference_mode():
        return torch.cat([model(t)[:, -1].argmax(-1) for t in tokens.split(_tl_chunk(tokens))])


@pytest.mark.parametrize("function", tasks.FUNCTIONS)
@pytest.mark.parametrize("n", PLAN_NS, ids=n_id)
@pytest.mark.parametrize("case", tasks.CASES)
def test_every_evaluator_gives_the_reference_answer(case, n, function):
    model = constructions.build(case, n)
    tokens = _inputs(case, n, function)
    reference = torch.tensor([tasks.evaluate(case, n, t) for t in tokens.tolist()])  # plain Python
    assert torch.equal(forward.predictions(model, tokens, chunk=256), reference)
    if n <= 4:  # TransformerLens on a sample: the exhaustive sets run through forward above
        tokens, reference = tokens[::7], reference[::7]
    assert torch.equal(_tl_predictions(model, tokens), reference)
    config = training.TrainConfig(case=case, n=n, d_token=2, n_layers=model.cfg.n_layers, function=function,
                                  eval_batches=1, batch_size=32)
    assert training.evaluate_accuracy(model, config) == 1.0
    assert fast_train.accuracy(model, config) == 1.0


# --------------------------------------------------------------------------------------------
# ties moved by a few ulps


def _ulp(x: torch.Tensor) -> torch.Tensor:
    return torch.nextafter(x, torch.tensor(float("inf"), dtype=x.dtype)) - x


def _perturbed_predictions(model, tokens, slot: torch.Tensor, ulps: int) -> torch.Tensor:
    """Predictions with the last layer's final-row score at key position ``slot`` [batch] moved
    by ``ulps`` ulps, before the attention mode reads the scores (a prepended hook), through
    :func:`_tl_predictions`' chunks (the hook takes each chunk's slots in turn)."""
    last = model.cfg.n_layers - 1
    hp = model.blocks[last].attn.hook_attn_scores
    done = [0]  # inputs the hook has seen: the next chunk's slots start there

    def move(scores, hook):
        scores = scores.clone()
        rows = torch.arange(scores.shape[0])
        at = slot[done[0] : done[0] + len(rows)]
        done[0] += len(rows)
        s = scores[rows, 0, -1, at]
        scores[rows, 0, -1, at] = s + ulps * _ulp(s)
        return scores

    hp.add_hook(move, prepend=True)
    try:
        return _tl_predictions(model, tokens)
    finally:
        model.reset_hooks()  # removes the temporary hook; the mode's permanent hooks stay


def _max_ulps(model, tokens) -> int:
    """The largest k with k ulps of the final row's top score inside the default tolerance,
    less 2 for the rounding the unperturbed scores may already differ by."""
    name = f"blocks.{model.cfg.n_layers - 1}.attn.hook_attn_scores"
    top = torch.cat([model.run_with_cache(t, names_filter=name)[1][name][:, 0, -1].max(-1).values
                     for t in tokens.split(_tl_chunk(tokens))])
    rtol, atol = attention.tie_tolerance(top.dtype)
    return int(((atol + rtol * top.abs()) / _ulp(top)).min()) - 2


@pytest.mark.parametrize("n", [4, 1000], ids=n_id)
@pytest.mark.parametrize("case", tasks.CASES)
def test_ties_moved_within_the_tolerance_keep_the_answer(case, n):
    model = constructions.build(case, n)
    g = torch.Generator().manual_seed(case)
    tokens, answers = tasks.sample(case, n, 8, generator=g, function="any")
    view = hooks.read(case, n, tokens)
    k_max = _max_ulps(model, tokens)
    assert k_max >= 8, k_max  # the tolerance is many ulps wide, as documented
    query_self = torch.full_like(view.attended, tokens.shape[1] - 1)
    for slot in (query_self, view.attended):
        for k in sorted({1, 4, k_max}):
            for sign in (1, -1):
                got = _perturbed_predictions(model, tokens, slot, sign * k)
                assert torch.equal(got, answers), (slot[0].item(), sign * k)


@pytest.mark.parametrize("case", [2, 3])
def test_exact_equality_breaks_on_one_ulp(case):
    """Why the tolerance exists (and that the test above can fail): with the definitions' exact
    equality (tolerance 0), one ulp more on the query's own score sends attention to the query
    itself and the answer goes wrong, as it did on an Intel CPU's AVX-512 path."""
    n = 100
    model = constructions.build(case, n, tie_rtol=0.0, tie_atol=0.0)
    g = torch.Generator().manual_seed(case)
    tokens, answers = tasks.sample(case, n, 8, generator=g, function="any")
    query_self = torch.full((8,), tokens.shape[1] - 1)
    assert torch.equal(_perturbed_predictions(model, tokens, query_self, 0), answers)
    assert not torch.equal(_perturbed_predictions(model, tokens, query_self, 1), answers)


def test_scores_further_apart_than_the_tolerance_are_not_merged():
    top = torch.tensor(1 / 2**0.5)
    rtol, atol = attention.tie_tolerance(torch.float32)
    tol = atol + rtol * top
    for gap, merged in ((0.5 * tol, True), (2 * tol, False), (20 * _ulp(top), True), (100 * _ulp(top), False)):
        scores = torch.stack([top - gap, top])[None]  # the earlier key is lower by `gap`
        left = attention.pattern_from_scores(scores, "leftmost")
        assert left.tolist() == ([[1.0, 0.0]] if merged else [[0.0, 1.0]]), float(gap)
        avg = attention.pattern_from_scores(scores, "average")
        assert avg.tolist() == ([[0.5, 0.5]] if merged else [[0.0, 1.0]])
    exact = attention.pattern_from_scores(torch.stack([top - _ulp(top), top])[None], "leftmost", tie_rtol=0, tie_atol=0)
    assert exact.tolist() == [[0.0, 1.0]]  # tolerance 0: the definitions' exact equality


def test_a_tolerance_wider_than_the_score_gap_breaks_the_construction():
    """The tolerance matters: merging the target's neighbours (gap ~1.4e-5 at n = 1000) puts a
    wrong key first under leftmost attention, so the tolerance must stay below the gap."""
    model = constructions.build(2, 1000, tie_rtol=0.0, tie_atol=1e-4)
    g = torch.Generator().manual_seed(0)
    tokens, answers = tasks.sample(2, 1000, 64, generator=g)
    assert (forward.predictions(model, tokens) != answers).any()


def test_bad_tolerance_is_refused():
    model = constructions.build(2, 4)
    for bad in (-1e-7, float("nan"), float("inf"), "1e-7"):
        with pytest.raises(ValueError, match="tie_rtol"):
            attention.set_attention(model, "leftmost", tie_rtol=bad)


# --------------------------------------------------------------------------------------------
# other CPUs, simulated through MKL's code paths

#: MKL_CBWR values and the branch code mkl_cbwr_get reports for each (mkl_cbwr.h)
MKL_BRANCHES = {"COMPATIBLE": 3, "SSE4_2": 8, "AVX2": 10, "AVX512": 12}


def _mkl_accepts(branch: int) -> bool:
    """Whether MKL takes ``branch`` on this CPU (asked in a fresh process: a branch is fixed
    at a process's first product)."""
    code = f"from interp.training.machine import mkl_library\nprint(mkl_library().mkl_serv_cbwr_set({branch}))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return out.returncode == 0 and out.stdout.strip() == "0"


@pytest.mark.skipif(os.environ.get("INTERP_MKL_CHILD") is not None, reason="already the child run")
@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch has no MKL here")
@pytest.mark.parametrize("name", list(MKL_BRANCHES))
@pytest.mark.parametrize("n", [1000], ids=n_id)  # the size the child runs, in this test's id too
def test_exact_under_every_mkl_code_path(n, name):
    if not _mkl_accepts(MKL_BRANCHES[name]):
        pytest.skip(f"MKL refuses MKL_CBWR={name} on this CPU")
    env = {**os.environ, "MKL_CBWR": name, "INTERP_MKL_CHILD": str(MKL_BRANCHES[name])}
    here = Path(__file__)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(here),
         "-k", f"{n_id(n)} and (reference_answer or ties_moved) or child_runs"],
        capture_output=True, text=True, cwd=here.parents[2], env=env, timeout=1200,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    # every selected test ran in the child (the branch check included: nothing skipped there)
    assert " passed" in out.stdout and "skipped" not in out.stdout and "child_runs" not in out.stdout


def test_a_size_left_out_by_keyword_starts_no_child_run_of_it():
    """``-k "not n1000"`` leaves out every test at n = 1000, the MKL child runs of that size too
    (they ran 21 minutes on loaded cores while the selection said otherwise)."""
    here = Path(__file__)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(here),
         "-k", "not n1000"], capture_output=True, text=True, cwd=here.parents[2], timeout=300)
    selected = [line for line in out.stdout.splitlines() if "::" in line]
    assert out.returncode == 0 and selected, out.stdout[-2000:] + out.stderr[-2000:]
    assert not [t for t in selected if "1000" in t or "mkl_code_path" in t]


@pytest.mark.skipif(os.environ.get("INTERP_MKL_CHILD") is None, reason="only in the MKL child run")
def test_child_runs_the_branch_it_was_given():
    from interp.sweeps.workers import mkl_branch

    torch.ones(4, 4) @ torch.ones(4, 4)  # MKL fixes its branch at the first product
    assert mkl_branch() == int(os.environ["INTERP_MKL_CHILD"])


# --------------------------------------------------------------------------------------------
# refusing what cannot be exact, before any work


@pytest.mark.parametrize("dtype", constructions.DTYPES)
@pytest.mark.parametrize("case", tasks.CASES)
def test_build_refuses_beyond_the_measured_limit_at_once(case, dtype):
    import time

    limit = constructions.EXACT_UP_TO[(case, constructions.default_layers(case), dtype)]
    for n in (limit + 1, 10**6):
        start = time.process_time()
        with pytest.raises(ValueError, match=f"accepted n <= {limit}"):
            constructions.build(case, n, dtype=dtype)
        assert time.process_time() - start < 0.5  # refused before allocating (10**6: GBs)
    assert constructions.build(case, min(limit, 8), dtype=dtype).cfg.d_vocab_out == min(limit, 8)


def test_build_refuses_weights_larger_than_memory_even_unchecked():
    with pytest.raises(ValueError, match=r"GiB of weights.*at most half of this machine"):
        constructions.build(2, 10**6, check_precision=False)


def test_verify_cli_refuses_beyond_the_limit(capsys):
    from interp import cli

    limit = constructions.EXACT_UP_TO[(5, 2, torch.float32)]
    assert cli.main(["verify", "--case", "5", "--n", "100000"]) == 2
    err = capsys.readouterr().err
    assert f"accepted n <= {limit}" in err and "Traceback" not in err
