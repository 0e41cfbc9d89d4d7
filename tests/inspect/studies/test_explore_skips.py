"""The explorer skips a run whose checkpoint holds NaN weights (its hashes recomputed, so only
the values give it away) and says so on the page, instead of losing the whole page (issue 24,
item 8). Reference: which seed was poisoned, by construction."""

import hashlib
import json
from html.parser import HTMLParser
import pytest

from safetensors.torch import load_file, save_file

from interp.core import models
from interp.inspect.studies import explore
from interp.inspect.tools import hooks
from interp.training import checkpoints
from interp.sweeps import store
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it

CASE, N = 3, 6


def _config(seed):
    return TrainConfig(case=CASE, n=N, d_token=2, pos_embed="none", seed=seed)


def _store(root, seeds):
    with store.Store(root / "results" / "store.sqlite") as db:
        for seed in seeds:
            cfg = _config(seed)
            model = models.build_model(CASE, N, 2, pos_embed="none", seed=seed)
            path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
            db.put(store.RunRecord(name=cfg.name(), sweep="tiny", config=cfg.to_dict(), seed=seed,
                                   status="ok", accuracy=evaluate_accuracy(model, cfg)),
                   path)
    return root


def _poison(root, seed):
    """Three NaN in W_Q of the seed's checkpoint, config.json's sha256 recomputed."""
    path = root / "results" / "checkpoints" / _config(seed).name()
    weights = path / "model.safetensors"
    state = load_file(str(weights))
    state["blocks.0.attn.W_Q"].view(-1)[:3] = float("nan")
    save_file(state, str(weights))
    meta = json.loads((path / "config.json").read_text())
    meta["sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(meta))
    return weights


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.seeds = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and "data-seed" in dict(attrs):
            self.seeds.append(dict(attrs)["data-seed"])


def test_a_run_with_nan_weights_is_skipped_and_named_on_the_page(tmp_path):
    root = _store(tmp_path / "sweep", seeds=(0, 1))
    weights = _poison(root, 1)
    index = explore.write_explorer(root, tmp_path / "page", inputs=1, batch_size=32)
    text = index.read_text()
    rows = _Rows()
    rows.feed(text)
    assert rows.seeds == [explore.seed_id(_config(0).name())]  # the good seed is shown
    assert "Skipped runs" in text and f"run <code>{_config(1).name()}</code>" in text
    assert f"{weights}: tensor blocks.0.attn.W_Q has non-finite values (3 NaN)" in text
    assert sorted(p.name for p in (tmp_path / "page" / "seeds").iterdir()) == [
        explore.seed_id(_config(0).name())]


def test_a_store_whose_every_run_is_skipped_still_gets_a_page(tmp_path):
    """The page says why, and the command fails (issue 55: it fails when nothing can be read)."""
    root = _store(tmp_path / "sweep", seeds=(1,))
    _poison(root, 1)
    index = tmp_path / "page" / "index.html"
    with pytest.raises(ValueError, match=f"could be shown: 1 skipped, each named in {index}"):
        explore.write_explorer(root, tmp_path / "page", inputs=1, batch_size=32)
    text = index.read_text()
    assert "Skipped runs" in text and "No run of this store could be shown" in text
    assert 'data-seed="' not in text.split("<h1>", 1)[1].split("<script", 1)[0]
