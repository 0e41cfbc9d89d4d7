"""Every checkpoint is checked against its store row before the explorer measures it (issue 43):
two checkpoint folders swapped (each self-consistent), a folder replaced by another run's model,
a checkpoint of another case with the store's checksums recomputed over it: each is a named skip
(the run and its folder on the page), never shown as that run, and the page is written.
:func:`interp.sweeps.store.checked_checkpoint` is tested directly too. An atlas that does not
list some of the store's runs is marked older than its store.

Reference: which folders were swapped or replaced, by construction here."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import sqlite3
from contextlib import closing
from html.parser import HTMLParser

import pytest

from interp.core import models
from interp.inspect.studies import explore
from interp.sweeps import store
from interp.training import checkpoints
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it
from interp.training.trainer import TrainConfig


def _config(seed, case=3):
    return TrainConfig(case=case, n=6, d_token=2, pos_embed="none", seed=seed)


def _store(root, seeds=(0, 1, 2)):
    """A store of untrained models whose rows carry their checkpoints' checksums (as the driver
    writes them)."""
    with store.Store(root / "results" / "store.sqlite") as db:
        for seed in seeds:
            cfg = _config(seed)
            model = models.build_model(3, 6, 2, pos_embed="none", seed=seed)
            path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
            sums = {f: hashlib.sha256((path / f).read_bytes()).hexdigest()
                    for f in ("config.json", "model.safetensors")}
            db.put(store.RunRecord(name=cfg.name(), sweep="tiny", config=cfg.to_dict(), seed=seed,
                                   status="ok", accuracy=evaluate_accuracy(model, cfg)), path, sums)
    return root / "results" / "store.sqlite"


def _folder(path, seed):
    return path.parent / "checkpoints" / _config(seed).name()


def _swap(path, a, b):
    x, y = _folder(path, a), _folder(path, b)
    tmp = x.with_name("swap")
    x.rename(tmp)
    y.rename(x)
    tmp.rename(y)


def _reseal(path, seed):
    """The forger's step: the row's checksums and digests recomputed over the folder's files."""
    name, folder = _config(seed).name(), _folder(path, seed)
    sums = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in ("config.json", "model.safetensors")}
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE runs SET checksums=? WHERE name=?", (json.dumps(sums, sort_keys=True), name))
        values = db.execute(f"SELECT {', '.join(store.RUN_COLUMNS)} FROM runs WHERE name=?", (name,)).fetchone()
        db.execute("UPDATE runs SET row_sha256=? WHERE name=?", (store.row_digest(values), name))


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.seeds = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and "data-seed" in dict(attrs):
            self.seeds.append(dict(attrs)["data-seed"])


def _shown(index) -> list[str]:
    rows = _Rows()
    rows.feed(index.read_text())
    return rows.seeds


def test_checked_checkpoint_returns_the_folder_or_names_the_mismatch(tmp_path):
    path = _store(tmp_path)
    df = store.read(path).set_index("seed", drop=False)
    assert store.checked_checkpoint(path, df.loc[0]) == _folder(path, 0)
    raw = store.read(path, expand=False).iloc[0].to_dict()  # relative checkpoint, JSON checksums
    assert store.checked_checkpoint(path, raw) == _folder(path, 0)
    _swap(path, 0, 1)
    for seed in (0, 1):
        with pytest.raises(store.CheckpointMismatch) as e:
            store.checked_checkpoint(path, df.loc[seed])
        assert str(e.value).startswith(f"run {_config(seed).name()}: checkpoint folder {_folder(path, seed)}: ")
        assert "does not hash as the store recorded" in str(e.value)
    _reseal(path, 0)  # the checksums forged over the swapped folder: the config.json still says
    df = store.read(path).set_index("seed", drop=False)
    with pytest.raises(store.CheckpointMismatch, match=f"is run {_config(1).name()}'s"):
        store.checked_checkpoint(path, df.loc[0])
    shutil.rmtree(_folder(path, 2))
    with pytest.raises(store.CheckpointMismatch, match="the folder is missing"):
        store.checked_checkpoint(path, df.loc[2])
    assert isinstance(store.CheckpointMismatch("a", "b", "c"), ValueError)


def test_swapped_checkpoints_are_named_skips_never_shown_as_the_other_run(tmp_path):
    path = _store(tmp_path / "sweep")
    _swap(path, 0, 1)
    index = explore.write_explorer(path, tmp_path / "page", inputs=1, batch_size=32)
    text = index.read_text()
    assert _shown(index) == [explore.seed_id(_config(2).name())]
    for seed in (0, 1):
        assert f"run <code>{_config(seed).name()}</code>: run {_config(seed).name()}: checkpoint folder " \
               f"{_folder(path, seed)}: " in text


def test_a_checkpoint_of_another_case_is_a_named_skip_not_an_abort(tmp_path):
    path = _store(tmp_path / "sweep")
    other = _config(1, case=1)
    model = models.build_model(1, 6, 2, pos_embed="none", seed=1)
    shutil.rmtree(_folder(path, 1))
    checkpoints.save(model, _folder(path, 1), other)
    _reseal(path, 1)  # the store's checksums recomputed: only the config.json tells
    index = explore.write_explorer(path, tmp_path / "page", inputs=1, batch_size=32)
    text = index.read_text()
    assert sorted(_shown(index)) == sorted(explore.seed_id(_config(s).name()) for s in (0, 2))
    assert f"checkpoint folder {_folder(path, 1)}: its config.json is of case=1, the store&#x27;s run of case=3" in text


def test_an_atlas_older_than_its_store_is_marked(tmp_path):
    path = _store(tmp_path / "sweep")
    columns = ["case", "n", "d_token", "n_layers", "pos_embed", "d_mlp", "mlp", "function",
               "architecture", "seed", "name", "status", "accuracy", "steps", "outcome", "label"]
    atlas = tmp_path / "sweep" / "atlas.csv"
    with open(atlas, "w", newline="") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        for seed in (0, 1):  # seed 2 trained after the atlas was written
            w.writerow(dict(case=3, n=6, d_token=2, n_layers=1, pos_embed="none", d_mlp=0, mlp="every",
                            function="permutation", architecture="attention-only", seed=seed,
                            name=_config(seed).name(), status="ok", accuracy=0.2, steps=1,
                            outcome="failed", label="failed"))
    text = explore.write_explorer(tmp_path / "sweep", tmp_path / "page", inputs=1, batch_size=32).read_text()
    assert "This atlas is older than its store: it does not list (or lists an earlier training of) 1 of the 3 runs" in text
    assert _config(2).name() in text.split("atlas-older", 1)[1].split("</p>", 1)[0]
    atlas.write_text(atlas.read_text() + ",".join(["3", "6", "2", "1", "none", "0", "every", "permutation",
                                                   "attention-only", "2", _config(2).name(), "ok", "0.2",
                                                   "1", "failed", "failed"]) + "\n")
    text = explore.write_explorer(tmp_path / "sweep", tmp_path / "page", inputs=1, batch_size=32).read_text()
    assert "atlas-older" not in text


def test_an_atlas_row_of_an_earlier_training_is_marked_older(tmp_path):
    """Issue 43's remainder: the atlas lists every run, but one row's checksum digest is not the
    store's (the run was retrained after the atlas): the page says the atlas is older."""
    from interp.inspect.studies import atlas_cache, explore_atlas
    from interp.sweeps import store

    path = _store(tmp_path / "sweep")
    runs = store.read(path)
    digest = {str(r["name"]): atlas_cache.run_checksum(r["checksums"]) for _, r in runs.iterrows()}
    names = list(digest)
    import pandas as pd

    df = pd.DataFrame({"name": names, "checksum": [digest[n] for n in names]})
    assert explore_atlas.older(df, names, digest) == []
    df.loc[1, "checksum"] = "0" * 16  # measured from an earlier training of run 1
    assert explore_atlas.older(df, names, digest) == [names[1]]
    df["checksum"] = ""  # an atlas from before digests: names only
    assert explore_atlas.older(df, names, digest) == []
    assert explore_atlas.older(df.drop(columns="checksum"), names, digest) == []
