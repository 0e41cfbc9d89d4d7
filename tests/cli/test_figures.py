"""Every figure the CLI writes has a title that says what it shows and labelled axes: read off the
matplotlib Figure objects themselves (their suptitle, each panel's title and axis labels), caught
on their way to :func:`interp.training.files.save_figure` while ``interp viz``, ``interp
analyze-sweep``, ``interp report`` and ``interp explore`` run. Issue 26, item 5."""

from __future__ import annotations

import textwrap

import pytest

from interp import cli
from interp.core import constructions, models
from interp.inspect.tools import hooks
from interp.sweeps import store
from interp.training import checkpoints, files
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it

SWEEP = "figs"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A sweep folder of one config with two seeds: the case-3 construction and a random init."""
    root = tmp_path_factory.mktemp(SWEEP) / SWEEP
    root.mkdir()
    (root / "configs.py").write_text(textwrap.dedent("""
        from interp.sweeps import TableLayout
        from interp.training.trainer import TrainConfig
        CONFIGS = [TrainConfig(case=3, n=6, d_token=2, pos_embed="none", seed=s) for s in (0, 1)]
        LAYOUT = TableLayout(rows=("case",), column="d_token")
    """))
    with store.Store(root / "results" / "store.sqlite") as db:
        for seed in (0, 1):
            cfg = TrainConfig(case=3, n=6, d_token=2, pos_embed="none", seed=seed)
            model = constructions.build(3, 6) if seed == 0 else models.build_model(3, 6, 2, pos_embed="none", seed=1)
            path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
            db.put(store.RunRecord(name=cfg.name(), sweep=SWEEP, config=cfg.to_dict(), seed=seed,
                                   status="ok", accuracy=evaluate_accuracy(model, cfg),
                                   steps=10, final_loss=0.1, seconds=1.0, curve=[[1, 1.8]]), path)
    return root


@pytest.fixture
def caught(monkeypatch):
    """(file name, Figure) of every figure saved while the test runs."""
    from interp.inspect.studies import explore
    from interp.inspect.tools import viz
    from interp.sweeps import report

    seen = []
    real = files.save_figure

    def keep(fig, path, **kw):
        seen.append((str(path).rsplit("/", 1)[-1], fig))
        return real(fig, path, **kw)

    for module in (files, viz, explore, report):
        monkeypatch.setattr(module, "save_figure", keep)
    return seen


def _check(name: str, fig) -> str:
    """The figure's title after checking it and every panel; AssertionError naming what lacks."""
    title = fig._suptitle.get_text() if fig._suptitle is not None else ""
    assert len(title.split()) >= 3, f"{name}: title {title!r} does not say what the figure shows"
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    assert panels, name
    for ax in panels:
        where = f"{name}, panel {ax.get_title()!r}"
        assert ax.get_title().strip(), f"{name}: a panel without a title"
        assert ax.get_xlabel().strip(), f"{where}: no x label"
        assert ax.get_ylabel().strip(), f"{where}: no y label"
    return title


def test_viz_figures_have_titles_and_labelled_axes(tmp_path, caught, capsys):
    assert cli.main(["viz", "--construction", "5", "--n", "5", "--out", str(tmp_path), "--inputs", "1"]) == 0
    assert sorted(n for n, _ in caught) == ["circles.png", "circuits.png", "spectra.png"]
    for name, fig in caught:
        assert "construction case 5" in _check(name, fig)


def test_analysis_violins_are_titled_after_the_sweep_with_labelled_axes(sweep_dir, tmp_path, caught, capsys):
    assert cli.main(["analyze-sweep", str(sweep_dir), "--all", "--batch-size", "32", "--out", str(tmp_path),
                     "--name", "analysis", "--json"]) == 0
    assert [n for n, _ in caught] == ["analysis-violins.png"]
    title = _check(*caught[0])
    assert SWEEP in title and "2 seed(s)" in title, title


def test_report_figures_have_a_title_and_labelled_axes(sweep_dir, tmp_path, caught, capsys):
    assert cli.main(["report", str(sweep_dir), "--out", str(tmp_path)]) == 0
    assert [n for n, _ in caught] == ["violins.png", "loss-curves.png"]
    for name, fig in caught:
        _check(name, fig)


def test_explorer_figures_have_titles_and_labelled_axes(sweep_dir, tmp_path, caught, capsys):
    assert cli.main(["explore", str(sweep_dir), "--out", str(tmp_path), "--inputs", "1",
                     "--batch-size", "32", "--where", "seed=0", "--json"]) == 0
    assert sorted(n for n, _ in caught) == ["circles.png", "circuits.png", "measures.png", "violins.png"]
    for name, fig in caught:
        _check(name, fig)
