"""The explorer's atlas view (issue 29, item 5): the atlas as clickable grids, a cell listing its
seeds with links to their views, checked in the page's HTML and in real headless Chromium.

The store is test_explore's three seeds (case 3, n = 10, d_token 2: the construction, its
inverted copy, a random initialisation). The atlas beside it is written here by hand (the view
shows what ``atlas.csv`` says, it recomputes nothing): those three seeds, plus seeds of other
cells that are not in the store (so they have no view), a cell left out (blank), widths and n
whose text order differs from their numeric order, a second panel, a failed run, a label that
needs escaping and a run name of digits only. The reference for every check is that CSV read
back with the csv module, not the code under test.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from html.parser import HTMLParser

import pytest

from interp import cli
from interp.inspect.studies import explore
from interp.training.trainer import TrainConfig
from test_explore import _chromium, make_store  # tests/inspect is on sys.path (pytest rootdir)

COLUMNS = ["case", "n", "d_token", "n_layers", "pos_embed", "d_mlp", "mlp", "function",
           "architecture", "seed", "name", "status", "accuracy", "steps", "outcome", "label", "mass"]
ODD = 'a<b&"c'  # a label the page must escape
STORE_CELL = (3, 1, "attention-only", "permutation", 10, 2)  # (case, layers, arch, function, n, d)
FAKE_CELL = (3, 1, "attention-only", "permutation", 20, 16)


def _name(seed: int) -> str:
    return TrainConfig(case=3, n=10, d_token=2, pos_embed="none", seed=seed).name()


def _rows() -> list[dict]:
    panel3 = dict(case=3, n_layers=1, pos_embed="none", d_mlp=0, mlp="every",
                  function="permutation", architecture="attention-only")
    panel5 = dict(case=5, n_layers=2, pos_embed="learned", d_mlp=0, mlp="every", function="any",
                  architecture="attention-only")
    rows = [  # (panel, n, d, seed, name, status, accuracy, outcome, label)
        (panel3, 10, 2, 0, _name(0), "ok", 1.0, "success", "construction"),
        (panel3, 10, 2, 1, _name(1), "ok", 1.0, "success", "inverted"),
        (panel3, 10, 2, 2, _name(2), "ok", 0.16, "failed", "failed"),
        (panel3, 10, 8, 0, "fake00000001", "ok", 0.995, "success", "mirror"),
        (panel3, 10, 8, 1, "fake00000002", "ok", 0.7, "partial", "none"),
        (panel3, 20, 2, 0, "fake00000003", "ok", 0.1, "failed", "failed"),
        (panel3, 20, 16, 0, "fake00000004", "ok", 1.0, "success", "construction"),
        (panel3, 20, 16, 1, "fake00000005", "ok", 0.999, "success", "mirror"),
        (panel3, 20, 16, 2, "001234567890", "ok", 0.5, "partial", "none"),
        (panel5, 3, 8, 0, "fake00000006", "ok", 1.0, "success", ODD),
        (panel5, 3, 8, 1, "fake00000007", "failed: boom", "", "failed", "failed"),
    ]
    return [{**p, "n": n, "d_token": d, "seed": s, "name": name, "status": status, "accuracy": acc,
             "steps": 100 + s, "outcome": outcome, "label": label, "mass": 0.5}
            for p, n, d, s, name, status, acc, outcome, label in rows]


def write_atlas(path, rows=None):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(_rows() if rows is None else rows)
    return path


def expected(path) -> dict:
    """panel (case, layers, arch, function) -> (n, d) -> the CSV's rows of that cell."""
    cells = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            panel = (int(r["case"]), int(r["n_layers"]), r["architecture"], r["function"])
            cells[panel][int(r["n"]), int(r["d_token"])].append(r)
    return cells


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = make_store(tmp_path_factory.mktemp("atlas-sweep"))
    atlas = write_atlas(root / "atlas.csv")  # in the sweep folder: found without --atlas
    index = explore.write_explorer(root, root / "explore", inputs=1, batch_size=64)
    return root, index, atlas


class _Buttons(HTMLParser):
    """Every button of an HTML fragment: its attributes and its text."""

    def __init__(self):
        super().__init__()
        self.buttons, self.open = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "button":
            self.open = dict(attrs, text="")
            self.buttons.append(self.open)

    def handle_endtag(self, tag):
        if tag == "button":
            self.open = None

    def handle_data(self, data):
        if self.open is not None:
            self.open["text"] += data


def _grids(text: str) -> dict:
    """panel -> {"ds", "ns", "cells", "blank"}, read from the page's HTML."""
    panels = {}
    for m in re.finditer(r'<table class="atlas" ([^>]*)>(.*?)</table>', text, re.DOTALL):
        attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1)))
        key = (int(attrs["case"]), int(attrs["layers"]), attrs["architecture"], attrs["function"])
        rows = re.findall(r"<tr>(.*?)</tr>", m.group(2), re.DOTALL)
        ds = [int(d) for d in re.findall(r"<th>(\d+)</th>", rows[0])]
        ns = [int(re.match(r"<th>(\d+)</th>", r).group(1)) for r in rows[1:]]
        parser = _Buttons()
        parser.feed(m.group(2))
        cells = {(int(b["data-n"]), int(b["data-d"])): b for b in parser.buttons}
        panels[key] = dict(ds=ds, ns=ns, cells=cells, blank=m.group(2).count('class="not-run"'))
    return panels


def test_grid_has_one_cell_per_run_cell_with_the_csvs_success_fraction(written):
    _, index, atlas = written
    text = index.read_text()
    want, got = expected(atlas), _grids(text)
    assert set(got) == set(want)
    for panel, cells in want.items():
        g = got[panel]
        assert g["ds"] == sorted({d for _, d in cells}) and g["ns"] == sorted({n for n, _ in cells})
        assert set(g["cells"]) == set(cells), panel  # a button per cell that was run
        assert g["blank"] == len(g["ds"]) * len(g["ns"]) - len(cells)  # the rest blank
        for (n, d), rows in cells.items():
            k = sum(r["outcome"] == "success" for r in rows)
            button = g["cells"][n, d]
            assert button["data-success"] == f"{k}/{len(rows)}", (panel, n, d)
            assert button["text"].startswith(f"{k}/{len(rows)}"), button["text"]
    assert got[(3, 1, "attention-only", "permutation")]["ds"] == [2, 8, 16]  # numeric, not text order
    assert got[(3, 1, "attention-only", "permutation")]["ns"] == [10, 20]
    assert got[FAKE_CELL[:4]]["cells"][20, 16]["text"] == "2/3 c1 m1"  # the mechanism mix
    assert got[STORE_CELL[:4]]["cells"][10, 2]["text"] == "2/3 c1 i1"
    assert got[(5, 2, "attention-only", "any")]["cells"][3, 8]["text"] == f"1/2 {ODD} 1"
    assert ODD not in text and "a&lt;b&amp;&quot;c" in text  # escaped wherever it appears
    assert 'data-name="001234567890"' in text  # a name of digits stays the run's name


def _visible_lists(dom: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r'<div class="atlas-seeds" ([^>]*)>(.*?)</div>', dom, re.DOTALL)
            if not re.search(r"\bhidden\b", m.group(1))]


def _click(cell) -> str:
    _, layers, arch, function, n, d = cell
    return (f'document.querySelector(\'button.atlas-cell[data-layers="{layers}"][data-architecture='
            f'"{arch}"][data-function="{function}"][data-n="{n}"][data-d="{d}"]\').click();')


@pytest.mark.parametrize("cell", [STORE_CELL, FAKE_CELL], ids=["store-seeds", "no-views"])
def test_clicking_a_cell_lists_its_seeds_in_chromium(written, tmp_path, cell):
    _, index, atlas = written
    dom = _chromium(index, "", tmp_path, _click(cell))
    shown = _visible_lists(dom)
    assert len(shown) == 1, f"{len(shown)} seed lists shown after one click"
    rows = {m.group(1): re.findall(r"<td>(.*?)</td>", m.group(2))
            for m in re.finditer(r'<tr data-name="([^"]+)">(.*?)</tr>', shown[0], re.DOTALL)}
    want = {r["name"]: r for r in expected(atlas)[cell[:4]][cell[4:]]}
    assert set(rows) == set(want)
    in_store = {_name(s) for s in range(3)}
    for name, tds in rows.items():
        r = want[name]
        assert tds[0] == r["seed"] and tds[3:5] == [r["outcome"], r["label"]], (name, tds)
        assert abs(float(tds[1]) - float(r["accuracy"])) < 1e-4 and tds[2] == r["steps"]
        link = re.search(r'href="#seed=([\w-]+)"', tds[5])
        assert (link.group(1) if link else None) == (explore.seed_id(name) if name in in_store else None)
    assert re.search(r'<button[^>]*aria-pressed="true"[^>]*data-n="%d" data-d="%d"' % cell[4:], dom)
    assert re.search(r'<p id="atlas-hint"[^>]*hidden', dom)


def test_a_seed_link_opens_that_seeds_view_in_chromium(written, tmp_path):
    _, index, _ = written
    sid = explore.seed_id(_name(1))
    script = (_click(STORE_CELL) + 'setTimeout(function () { document.querySelector('
              f'\'div.atlas-seeds:not([hidden]) a[href="#seed={sid}"]\').click(); setTimeout(function () {{'
              'var s = document.querySelector("section.seed:not([hidden])"); '
              'document.body.dataset.hash = location.hash; '
              'document.body.dataset.top = String(Math.round(s.getBoundingClientRect().top)); '
              'document.body.dataset.screen = String(window.innerHeight); }, 500); }, 300);')
    dom = _chromium(index, "", tmp_path, script)
    assert re.search(r'data-hash="([^"]*)"', dom).group(1) == f"#seed={sid}"
    sections = re.findall(r'<section class="seed" id="seed-([\w-]+)"([^>]*)>', dom)
    assert len(sections) == 3 and [s for s, a in sections if "hidden" not in a] == [sid], sections
    top, screen = (int(re.search(rf'data-{k}="(-?\d+)"', dom).group(1)) for k in ("top", "screen"))
    assert 0 <= top < screen, f"the seed's view is at {top} px, outside the {screen} px window"
    assert re.search(rf'<tr data-seed="{sid}" class="selected">', dom)


def test_the_atlas_is_found_given_or_left_out(written, tmp_path, capsys):
    root, _, atlas = written
    args = ["explore", str(root), "--where", "seed=0", "--inputs", "1", "--batch-size", "32", "--json"]
    elsewhere = write_atlas(tmp_path / "mine.csv")
    assert cli.main([*args, "--out", str(tmp_path / "given"), "--atlas", str(elsewhere)]) == 0
    page = (tmp_path / "given" / "index.html").read_text()
    assert '<section id="atlas">' in page and str(elsewhere) in page and "function showCell" in page
    assert "11 seeds, 1 of them with a view on this page" in page  # --where kept one seed's view

    other = [{**r, "name": f"other{i:07d}"} for i, r in enumerate(_rows())]  # another store's atlas
    (tmp_path / "other").mkdir()
    write_atlas(tmp_path / "other" / "atlas.csv", other)  # beside the page's folder
    assert cli.main([*args, "--out", str(tmp_path / "other" / "page")]) == 0
    page = (tmp_path / "other" / "page" / "index.html").read_text()
    assert 'id="atlas"' not in page and "showCell" not in page  # the page as it was

    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    for given, said in [(tmp_path / "missing.csv", "no such file"), (bad, "is not an atlas table")]:
        capsys.readouterr()
        out = tmp_path / f"refused-{given.stem}"
        assert cli.main([*args, "--out", str(out), "--atlas", str(given)]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and str(given) in err and len(err.splitlines()) == 1, err
        assert not out.exists()  # refused before any work
