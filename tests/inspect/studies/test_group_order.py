"""Groups are listed in numeric order (d_token 2, 8, 16; not the text order 16, 2, 8 nor the
store's order) in the explorer's table and selector and in analysis.md, through one sort key.

The store holds one random-init seed per d_token, written in the order 16, 2, 8. The reference
order is the d_token values sorted as integers, read back from each written label with a regex.
"""

import re

import pytest

from interp.core import models
from interp.inspect.mechanism import labels
from interp.inspect.studies import analysis, explore
from interp.inspect.tools import hooks
from interp.sweeps import store
from interp.training import checkpoints
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it

CASE, N = 3, 6
WRITTEN = (16, 2, 8)  # the store's order; text order would be 16, 2, 8 as well
NUMERIC = sorted(WRITTEN)


def _d_tokens(texts) -> list[int]:
    return [int(re.search(r"d_token=(\d+)", t).group(1)) for t in texts]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("order")
    with store.Store(root / "results" / "store.sqlite") as db:
        for d_token in WRITTEN:
            for seed in (1, 0):  # seeds too are written out of order
                cfg = TrainConfig(case=CASE, n=N, d_token=d_token, pos_embed="none", seed=seed)
                model = models.build_model(CASE, N, d_token, pos_embed="none", seed=seed)
                path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
                db.put(store.RunRecord(name=cfg.name(), sweep="order", config=cfg.to_dict(), seed=seed,
                                       status="ok", accuracy=evaluate_accuracy(model, cfg)), path)
    return root


def test_the_sort_key_orders_numbers_inside_labels_as_numbers():
    texts = ["case 3, n=6, d_token=16, 1 layer", "case 3, n=6, d_token=2, 1 layer",
             "case 3, n=12, d_token=2, 1 layer", "case 10, n=6, d_token=2, 1 layer"]
    assert sorted(texts, key=labels.group_sort_key) == [texts[1], texts[0], texts[2], texts[3]]
    assert sorted([16, 2, 8.5, 1e-05], key=labels.group_sort_key) == [1e-05, 2, 8.5, 16]
    assert sorted(["PE none", "PE learned"], key=labels.group_sort_key) == ["PE learned", "PE none"]


def test_explorer_lists_groups_in_numeric_order(root, tmp_path):
    assert [int(s) for s in explore.runs(root).seed] == [0, 1] * len(NUMERIC)
    index = explore.write_explorer(root, tmp_path / "page", where={"seed": "1"}, inputs=1, batch_size=32)
    text = index.read_text()
    rows = re.findall(r'<tr data-seed="[\w-]+"><td><a [^>]*>\d+</a></td><td>([^<]*)</td>', text)
    assert _d_tokens(rows) == NUMERIC
    assert _d_tokens(re.findall(r'<optgroup label="([^"]*)"', text)) == NUMERIC
    assert _d_tokens(re.findall(r"<section [^>]*>\s*<h2>([^<]*)</h2>", text)) == NUMERIC


def test_analysis_md_lists_groups_in_numeric_order(root, tmp_path):
    res = analysis.analyze_sweep(root, all_groups=True, batch_size=32)
    assert _d_tokens(res.groups.group) == NUMERIC
    assert _d_tokens(res.answers) == NUMERIC
    assert list(res.table.seed) == [0, 1] * len(NUMERIC)
    md = analysis.write_report(res, tmp_path, "analysis")["report"].read_text()
    assert _d_tokens(re.findall(r"^## (case .*)$", md, re.MULTILINE)) == NUMERIC
    groups_table = md.split("## Groups", 1)[1].split("\n## ", 1)[0]
    assert _d_tokens(re.findall(r"^\| (case [^|]*)\|", groups_table, re.MULTILINE)) == NUMERIC
