"""Hostile input (property-based): the public core API and the CLI answer malformed input with a
ValueError (CLI: exit code 2 and a message) that names the problem; never a crash deep inside
torch and never a silent wrong answer."""

import contextlib
import dataclasses
import io
import math
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from interp import cli
from interp.core import attention as attention_modes
from interp.core import constructions, fields, models, tasks
from interp.training.trainer import TrainConfig

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ints = st.integers(min_value=-5, max_value=12)
anything = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3), ints,
    st.lists(ints, max_size=6), st.lists(st.floats(), min_size=1, max_size=4),
)


@SETTINGS
@given(case=st.one_of(ints, st.text(max_size=2), st.none()), n=anything)
def test_sample_rejects_or_returns_valid_inputs(case, n):
    try:
        tokens, answers = tasks.sample(case, n, 3)
    except ValueError:
        return
    # accepted: then it really is a valid input of that case, with the right answers
    assert [tasks.evaluate(case, n, row) for row in tokens.tolist()] == answers.tolist()


@SETTINGS
@given(case=st.sampled_from(tasks.CASES), keys=st.one_of(st.none(), st.lists(ints, max_size=6)),
       values=st.lists(ints, max_size=6), target=ints)
def test_encode_never_silently_wrong(case, keys, values, target):
    try:
        tokens = tasks.encode(case, keys, values, target)
    except ValueError:
        return
    n = len(values)
    k = list(range(n)) if keys is None else keys
    assert sorted(k) == list(range(n)) and 0 <= target < n and all(0 <= v < n for v in values)
    assert tasks.evaluate(case, n, tokens[0]) == values[k.index(target)]


@SETTINGS
@given(
    case=st.sampled_from(tasks.CASES),
    n=st.integers(1, 5),
    tokens=st.one_of(
        st.lists(st.lists(st.integers(-3, 40), min_size=1, max_size=12), min_size=1, max_size=3),
        st.lists(st.lists(st.floats(0, 3), min_size=1, max_size=12), min_size=1, max_size=2),
    ),
)
def test_answers_validates_token_batches(case, n, tokens):
    if len({len(r) for r in tokens}) > 1:
        return  # ragged lists are not tensors
    try:
        got = tasks.answers(case, n, tokens)
    except ValueError:
        return
    assert got.tolist() == [tasks.evaluate(case, n, row) for row in tokens]


def _is_int(x, lo: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= lo


def _first_bad(checks: list[tuple[str, bool]]) -> str | None:
    """The first field whose value the independent table below rejects (None: all valid)."""
    return next((name for name, ok in checks if not ok), None)


@SETTINGS
@given(case=anything, n=anything, d_token=anything, n_layers=anything, pos_embed=anything)
def test_build_model_validates_every_field(case, n, d_token, n_layers, pos_embed):
    bad = _first_bad([
        ("case", _is_int(case, 1) and case in tasks.CASES),
        ("n", _is_int(n, 1)),
        ("d_token", _is_int(d_token, 1)),
        ("n_layers", _is_int(n_layers, 1) and n_layers in (1, 2)),
        ("pos_embed", isinstance(pos_embed, str) and pos_embed in models.POS_EMBEDS),
    ])
    if bad is None:  # valid input is accepted as given
        spec = models.ModelSpec(case, n, d_token, n_layers, pos_embed)
        assert (spec.case, spec.n, spec.d_token, spec.n_layers, spec.pos_embed) == (case, n, d_token, n_layers, pos_embed)
        return
    with pytest.raises(ValueError, match="accepted") as e:  # invalid input is refused, naming the field
        models.ModelSpec(case, n, d_token, n_layers, pos_embed)
    assert str(e.value).startswith(f"{bad}="), (bad, str(e.value))


@SETTINGS
@given(case=anything, n=st.one_of(anything, st.integers(1, 10**7)),
       attention=st.one_of(anything, st.sampled_from(attention_modes.MODES)))
def test_build_construction_validates(case, n, attention):
    valid_case = _is_int(case, 1) and case in tasks.CASES
    limit = constructions.EXACT_UP_TO.get((case, constructions.default_layers(case), torch.float32)) if valid_case else None
    bad = _first_bad([
        ("case", valid_case),
        ("n", _is_int(n, 1) and (limit is None or n <= limit)),
        ("attention", isinstance(attention, str) and attention in attention_modes.MODES),
    ])
    if bad is None:
        model = constructions.build(case, n, attention=attention)
        assert model.cfg.d_vocab_out == n and [m[0] for m in attention_modes.modes(model)] == [attention] * model.cfg.n_layers
        return
    with pytest.raises(ValueError, match="accepted") as e:
        constructions.build(case, n, attention=attention)
    assert str(e.value).startswith((f"{bad}=", f"{bad}={n!r} is beyond")), (bad, str(e.value))


@settings(max_examples=15, deadline=None)
@given(argv=st.lists(st.sampled_from(["--case", "--n", "0", "-3", "x", "9", "2", "--plan", "exhaustive",
                                      "--inputs", "--dtype", "float16", "--attention", "soft"]), max_size=6))
def test_verify_cli_never_tracebacks(argv):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["verify", "--case", "1", "--n", "3", "--inputs", "5", *argv])
    except SystemExit as e:  # argparse: usage error, exit 2
        assert e.code == 2
        return
    err = err.getvalue()
    assert code in (0, 1, 2)
    if code == 2:
        assert "error:" in err


# --------------------------------------------------------------------------- configs and the sweep CLI


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _real(x):
    return (_int(x) or isinstance(x, float)) and math.isfinite(x)


#: the declared fields (the model's, and key_order) accept what their declarations say
#: (interp.core.fields: one table, read here too); "mlp"="last" needs d_mlp > 0, pos_init="zero"
#: a learned W_pos, key_order="batch" permuted keys (cases 3, 5)
DECLARED = {name: info.accepts for name, info in fields.infos(TrainConfig).items()}
#: the protocol's ranges, written out independently of TrainConfig.__post_init__
VALID = {
    **DECLARED,
    "n": lambda x: DECLARED["n"](x) and x >= 2,  # training needs n >= 2
    "seed": lambda x: _int(x) and 0 <= x < 2**63,
    "lr": lambda x: _real(x) and 0 < x <= 1,
    "batch_size": lambda x: _int(x) and x >= 1,
    "max_steps": lambda x: _int(x) and x >= 1,
    "stop_loss": lambda x: _real(x) and x >= 0,
    "eval_batches": lambda x: _int(x) and x >= 1,
    "curve_every": lambda x: _int(x) and x >= 1,
    "function": lambda x: isinstance(x, str) and x in ("permutation", "any"),
}
FIELDS = [f.name for f in dataclasses.fields(TrainConfig)]
BASE = dict(case=1, n=5, d_token=2)

values = st.one_of(
    anything, st.integers(-2**64, 2**64), st.floats(), st.sampled_from(["learned", "none", "gpt2", "any"]),
    st.dictionaries(st.text(max_size=2), ints, max_size=2), st.just(2**63), st.just(float("inf")),
)
SMALL = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_valid_table_covers_every_trainconfig_field():
    assert sorted(VALID) == sorted(FIELDS)


@SMALL
@given(changes=st.dictionaries(st.sampled_from(FIELDS), values, min_size=1, max_size=3))
def test_trainconfig_rejects_each_bad_field_by_name(changes):
    kwargs = {**BASE, **changes}
    bad = [f for f in FIELDS if f in kwargs and not VALID[f](kwargs[f])]
    try:
        config = TrainConfig(**kwargs)
    except ValueError as e:
        assert bad, f"refused valid values {kwargs}: {e}"
        assert str(e).startswith(f"{bad[0]}="), (bad, str(e))  # the first bad field, in order
        assert "accepted" in str(e)
        return
    assert not bad, f"accepted {bad[0]}={kwargs[bad[0]]!r}"
    assert TrainConfig.from_dict(config.to_dict()) == config


@SMALL
@given(extra=st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k not in FIELDS), ints,
                             min_size=1, max_size=2))
def test_from_dict_names_unknown_fields(extra):
    with pytest.raises(ValueError, match="unknown TrainConfig fields") as e:
        TrainConfig.from_dict({**BASE, **extra})
    assert repr(sorted(extra)[0]) in str(e.value)


def _cli(argv):
    """cli.main's exit code and stderr; argparse usage errors count as exit code 2."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def _src(v) -> str:
    """Python source for a value (repr, except non-finite floats, whose repr is no literal)."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, list):
        return "[" + ", ".join(_src(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_src(x)}" for k, x in v.items()) + "}"
    return repr(v)

field_names = st.sampled_from(["case", "pos_embed", "d_token", "seed", "colour", "", "n"])


def _too_big(fields: dict) -> bool:
    """Whether one training step of these (valid) fields needs more than half this machine's
    memory: the sweep refuses it before training (hypothesis found n = 2**63 valid)."""
    from interp.core import limits

    try:
        limits.check_trainable(TrainConfig(**fields))
    except ValueError:
        return True
    return False


@SMALL
@given(
    kwargs=st.dictionaries(st.sampled_from(["case", "n", "d_token", "n_layers", "lr", "pos_embed"]),
                           values, max_size=2),
    rows=st.one_of(st.lists(field_names, max_size=3), field_names, st.lists(ints, min_size=1, max_size=2)),
    column=st.one_of(field_names, ints, st.none()),
)
@example(kwargs={"n": 2**63}, rows=[], column="case")  # valid, refused for its size (found by CI)
def test_sweep_cli_on_generated_configs_py(kwargs, rows, column):
    """A configs.py with arbitrary TrainConfig values and LAYOUT: exit 0 (nothing trained:
    --limit 0) exactly when every value is valid, else exit 2 naming the bad field."""
    args = ", ".join(f"{k}={_src(v)}" for k, v in {**BASE, "max_steps": 5, **kwargs}.items())
    text = (
        "from interp.sweeps import TableLayout\nfrom interp.training.trainer import TrainConfig\n"
        f"CONFIGS = [TrainConfig({args})]\n"
        f"LAYOUT = TableLayout(rows={tuple(rows) if isinstance(rows, list) else rows!r}, column={column!r})\n"
    )
    merged = {**BASE, **kwargs}
    bad = [f for f in FIELDS if f in merged and not VALID[f](merged[f])]
    layout_ok = (isinstance(rows, list) and all(r in FIELDS for r in rows) and column in FIELDS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "s"
        folder.mkdir()
        (folder / "configs.py").write_text(text)
        code, err = _cli(["sweep", str(folder), "--limit", "0"])
    assert "Traceback" not in err
    if not bad and layout_ok and _too_big(merged):  # valid, but one step would not fit in memory
        assert code == 2 and "configs.py" in err and "this machine has" in err, err
        return
    if not bad and layout_ok:
        assert code == 0, err
        return
    assert code == 2 and err.startswith("interp sweep: error:") and "configs.py" in err
    if bad:
        assert f"{bad[0]}=" in err
    else:
        assert "layout" in err.lower()


TINY = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig
CONFIGS = [TrainConfig(case=c, n=5, d_token=4, pos_embed=pe, seed=s, max_steps=5)
           for c, pe in [(1, "learned"), (3, "none")] for s in (0, 1)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token")
"""


@pytest.fixture(scope="module")
def tiny_folder():
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tiny"
        folder.mkdir()
        (folder / "configs.py").write_text(TINY)
        yield folder


TINY_CONFIGS = [TrainConfig(case=c, n=5, d_token=4, pos_embed=pe, seed=s, max_steps=5).to_dict()
                for c, pe in [(1, "learned"), (3, "none")] for s in (0, 1)]


@SMALL
@given(where=st.lists(st.one_of(
    st.text(max_size=8),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["case", "seed", "pos_embed", "n", "colour", " case", ""]),
              st.sampled_from(["1", "3", "5", " 0", "none", "x", ""])),
), min_size=1, max_size=3))
def test_sweep_cli_where_values(tiny_folder, where):
    """--where: exit 0 (nothing trained: --limit 0) when every item is FIELD=VALUE on a
    TrainConfig field, no field is given two values, and some config matches them all; else
    exit 2 naming --where."""
    code, err = _cli(["sweep", str(tiny_folder), "--limit", "0", *[f"--where={w}" for w in where]])
    assert "Traceback" not in err
    items = [(k.strip(), v.strip()) for k, sep, v in (w.partition("=") for w in where) if sep]
    well_formed = len(items) == len(where) and all(k in FIELDS for k, _ in items)
    consistent = all(len({v for k2, v in items if k2 == k}) == 1 for k, _ in items)
    matched = any(all(str(c[k]) == v for k, v in items) for c in TINY_CONFIGS) if well_formed else False
    if well_formed and consistent and matched:
        assert code == 0, err
    else:
        assert code == 2 and err.startswith("interp sweep: error: --where"), err


@SMALL
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=50).map(str.encode),
                         st.just(b"SQLite format 3\x00" + b"\x00" * 84)))
def test_report_and_sweep_cli_on_a_file_that_is_not_a_store(tiny_folder, content):
    """A corrupt or foreign store file: exit 2 naming the file, never a traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "store.sqlite"
        bad.write_bytes(content)
        for cmd in ("report", "sweep"):
            extra = ["--out", tmp] if cmd == "report" else ["--limit", "0"]
            code, err = _cli([cmd, str(tiny_folder), "--store", str(bad), *extra])
            assert "Traceback" not in err
            assert code == 2 and err.startswith(f"interp {cmd}: error:"), err
            assert str(bad) in err, err


@pytest.mark.parametrize("cmd", ["sweep", "report"])
def test_cli_on_malformed_folders(tmp_path, cmd):
    missing = tmp_path / "nope"
    cases = {
        missing: f"sweep folder {missing} does not exist",
        tmp_path: "configs.py not found",
    }
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "configs.py").write_text("import os\nCONFIGS = [os.path.join(1)]\n")
    cases[broken] = "configs.py: TypeError"
    for folder, message in cases.items():
        code, err = _cli([cmd, str(folder)])
        assert code == 2 and message in err and "Traceback" not in err, err
    if cmd == "sweep":  # a folder where the store file should be
        good = tmp_path / "good"
        good.mkdir()
        (good / "configs.py").write_text(TINY)
        code, err = _cli([cmd, str(good), "--store", str(tmp_path)])
        assert code == 2 and f"store path {tmp_path} is a folder" in err and "Traceback" not in err
