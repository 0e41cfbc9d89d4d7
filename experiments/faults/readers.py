"""Issue 55's faults: what the readers (atlas, explore, analyze-sweep, probe, timeline, store
verify) do with evidence that disagrees, one bad run among good ones, and messages.

``scenarios(h)`` returns ``(key, fault, tries)`` rows for ``run.py``'s table; ``h`` is run.py's
module (its Bench, ``interp``, ``said`` and the safetensors helpers), passed in because run.py
runs as ``__main__``. The forger's tools here recompute the store's plain sha256s and row
digests (``interp.sweeps.store.row_digest``), as anyone can. Each row is judged as run.py's
are: a tampered run a command shows as valid counts as wrong ("served"); every command must end
in a named skip or a one-line refusal naming the path.

Not here (other engineers' items of issue 55): a registered task's sampler, a user task's answer
length (issue 50), report.md's escaping and ``interp report``'s use of the cross-checks (issue 53).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import time
from contextlib import closing
from pathlib import Path

FILES = ("config.json", "model.safetensors")


def _reseal(h, path: Path, run: str, **changes) -> None:
    """Row fields changed, the row's checksums recomputed over its folder's files, its digest
    recomputed: every check the store has passes."""
    from interp.sweeps import store

    folder = path.parent / "checkpoints" / run
    sums = {f: h.digest(folder / f) for f in FILES if (folder / f).is_file()}
    with closing(sqlite3.connect(path)) as db, db:
        for k, v in changes.items():
            db.execute(f"UPDATE runs SET {k}=? WHERE name=?", (v, run))
        db.execute("UPDATE runs SET checksums=? WHERE name=?", (json.dumps(sums, sort_keys=True), run))
        values = db.execute(f"SELECT {', '.join(store.RUN_COLUMNS)} FROM runs WHERE name=?", (run,)).fetchone()
        db.execute("UPDATE runs SET row_sha256=? WHERE name=?", (store.row_digest(values), run))


def _edit_meta(h, folder: Path, edit) -> None:
    meta = json.loads((folder / "config.json").read_text())
    edit(meta)
    meta["sha256"] = h.digest(folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(meta, indent=1))


def _worst(bench) -> str:
    """The reference run with the lowest accuracy (a forged 1.0 is then far from its truth)."""
    return min(sorted(bench.reference), key=lambda r: bench.reference[r][1] or 0.0)


def _readers(h, path: Path, run: str, *, measure_verify: bool = False) -> tuple[dict, dict]:
    """atlas, explore, analyze-sweep --all, probe of the run's folder and store verify on the
    store ``path``: {command: Ran}, {command: whether it showed ``run`` as valid}."""
    out = path.parent / "out"
    folder = path.parent / "checkpoints" / run
    ran = {
        "atlas": h.interp("atlas", path, "--out", out / "atlas", "--batch-size", "64"),
        "explore": h.interp("explore", path, "--out", out / "explore", "--inputs", "1", "--batch-size", "64"),
        "analyze": h.interp("analyze-sweep", path, "--all", "--json", "--batch-size", "64"),
        "probe": h.interp("probe", folder, "--batch-size", "64", "--json"),
        "verify": h.interp("store", "verify", path, *(("--measure",) if measure_verify else ())),
    }
    served = {"atlas": _atlas_served(out / "atlas" / "atlas.csv", run),
              "explore": f'data-seed="{run}"' in _text(out / "explore" / "index.html"),
              "analyze": ran["analyze"].code == 0 and run not in _json(ran["analyze"].out).get("skipped", {}),
              "probe": ran["probe"].code == 0, "verify": ran["verify"].code == 0}
    return ran, served


def _text(p: Path) -> str:
    return p.read_text(errors="replace") if p.is_file() else ""


def _json(text: str) -> dict:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _atlas_served(table: Path, run: str) -> bool:
    rows = [r for r in csv.DictReader(_text(table).splitlines()) if r.get("name") == run]
    return any(r.get("label") not in ("unmeasured", "failed") for r in rows)


def _summary(ran: dict, served: dict) -> str:
    return "; ".join(f"{k} exit {r.code}{' SHOWN AS VALID' if served[k] else ''}" for k, r in ran.items())


def forged_accuracy(h, bench, where: str) -> dict:
    """A store row's accuracy set to 1.0 (``where="row"``: the row alone, its checksum
    recomputed; ``"row+config"``: config.json's recorded result too, every checksum recomputed):
    every reader skips it by name, none shows it as a success."""
    path = bench.copy_ref(f"forge-{where.replace('+', '-')}")
    run = _worst(bench)
    if where != "row":
        _edit_meta(h, path.parent / "checkpoints" / run, lambda m: m["result"].update(accuracy=1.0))
    _reseal(h, path, run, accuracy=1.0)
    ran, served = _readers(h, path, run, measure_verify=where != "row")
    named = all(run in (r.out + r.err) for k, r in ran.items() if not served[k])
    said_by = next((r for k, r in ran.items() if k == "probe"), None)
    out = bench.judge(path, said_by, rerun=None, tampered={run}, served=any(served.values()),
                      check=named and not any(served.values()) and ran["atlas"].code == ran["explore"].code == 0)
    out["checked"] = _summary(ran, served) + f"; the run named by each: {'yes' if named else 'NO'}"
    return out


def swapped_shape(h, bench) -> dict:
    """A run's checkpoint replaced by a d_token-16 model of its case, config.json's train_config
    and result edited to the row's, every checksum recomputed."""
    path = bench.copy_ref("swap-shape")
    run = max(sorted(bench.reference), key=lambda r: bench.reference[r][1] or 0.0)  # one the atlas measures
    folder = path.parent / "checkpoints" / run
    config = json.loads(_text(folder / "config.json"))["train_config"]
    wide = path.parent / "wide"
    wide_cfg = {**config, "d_token": 16}
    code = ("import json, sys\nfrom interp.training.runs import TrainConfig\nfrom interp.training.trainer import train\n"
            "from interp.training import checkpoints\nc = TrainConfig.from_dict(json.loads(sys.argv[1]))\n"
            "checkpoints.save(train(c), sys.argv[2])\n")
    assert h.interp(json.dumps(wide_cfg), wide, python=code).code == 0
    for f in FILES:
        shutil.copyfile(wide / f, folder / f)
    accuracy = bench.reference[run][1]
    _edit_meta(h, folder, lambda m: m.update(train_config=config, result={**m["result"], "accuracy": accuracy,
                                                                            "steps": bench.reference[run][2]}))
    _reseal(h, path, run)
    ran, served = _readers(h, path, run)
    named = all(run in (r.out + r.err) for k, r in ran.items() if not served[k])
    out = bench.judge(path, ran["probe"], rerun=None, tampered={run}, served=any(served.values()),
                      check=named and not any(served.values()))
    out["checked"] = _summary(ran, served) + f"; the run named by each: {'yes' if named else 'NO'}"
    return out


def _small(h, bench, name: str) -> Path:
    """A copy of the reference store holding its two case-1 runs only (40 steps each): the
    timeline scenarios train them again with snapshots in seconds."""
    path = bench.copy_ref(name)
    keep = [r for r in sorted(bench.reference) if (path.parent / "checkpoints" / r / "config.json").is_file()
            and json.loads(_text(path.parent / "checkpoints" / r / "config.json"))["train_config"]["case"] == 1]
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(f"DELETE FROM runs WHERE name NOT IN ({', '.join('?' * len(keep))})", keep)
    for d in (path.parent / "checkpoints").iterdir():
        if d.name not in keep:
            shutil.rmtree(d)
    return path


def _timeline_base(h, bench) -> Path:
    """The small store with its timelines made once (``interp timeline``), copied by each try."""
    def make():
        path = _small(h, bench, "timeline-base")
        ran = h.interp("timeline", path, "--batch-size", "64")
        assert ran.code == 0, ran.err
        return path.parent
    return bench._once("timeline-base", make)


def forged_manifest(h, bench) -> dict:
    """A saved timeline's manifest edited three ways, each with its seal recomputed: plateau
    exit 100 -> 6, a loss set to 5.0, the steps list shortened."""
    base = _timeline_base(h, bench)
    run = sorted(p.name for p in (base / "checkpoints").iterdir())[0]
    edits = {"plateau": lambda m: m.update(plateau_exit=6), "loss": lambda m: m["losses"].update({"0": 5.0}),
             "steps": lambda m: m.update(steps=m["steps"][:-1])}
    results, said_by, served = [], None, False
    for what, edit in edits.items():
        path = bench.copy(base, f"manifest-{what}")
        manifest = path.parent / "checkpoints" / run / "timeline" / "manifest.json"
        m = json.loads(manifest.read_text())
        edit(m)
        from interp.training.snapshots import manifest_seal

        m["seal"] = manifest_seal(m)
        manifest.write_text(json.dumps(m))
        ran = h.interp("timeline", path, "--batch-size", "64", "--out", path.parent / "tl")
        verify = h.interp("store", "verify", path)
        md = _text(path.parent / "tl" / "timeline.md")
        shown = f"| {run}" in md or re.search(rf"\| [^|]* \| \d+ \| \d+ \|.*{run}", md) is not None
        shown = shown or (run in _text(path.parent / "tl" / "timeline.csv"))
        served |= shown or verify.code == 0
        said_by = said_by or ran
        results.append(f"{what}: timeline exit {ran.code}, the run {'SHOWN' if shown else 'skipped by name' if run in ran.err else 'left out UNNAMED'}, "
                       f"store verify exit {verify.code}")
    out = bench.judge(base / "store.sqlite", said_by, rerun=None, tampered={run}, served=served, names=[run],
                      check=not served and all("skipped by name" in r for r in results))
    out["checked"] = "; ".join(results)
    return out


def forged_timeline_csv(h, bench) -> dict:
    """timeline.csv edited (a run's plateau exit 1 and its routing labels), beside the store:
    explore shows a note, not the forged timeline; atlas uses none of it."""
    base = _timeline_base(h, bench)
    path = bench.copy(base, "timeline-csv")
    table = path.parent / "timeline.csv"
    rows = list(csv.reader(table.read_text().splitlines()))
    head = rows[0]
    run = rows[1][head.index("run")]
    for r in rows[1:]:
        if r[head.index("run")] == run:
            r[head.index("plateau_exit")], r[head.index("routing")] = "1", "lookup"
    table.write_text("\n".join(",".join(r) for r in rows) + "\n")
    page = path.parent / "explore"
    explore = h.interp("explore", path, "--out", page, "--inputs", "1", "--batch-size", "64")
    text = _text(page / "index.html")
    noted = "Timeline not shown" in text and "fails its seal" in text
    forged_shown = "left its plateau at step 1" in text
    atlas = h.interp("atlas", path, "--out", path.parent / "atlas", "--batch-size", "64")
    arows = [r for r in csv.DictReader(_text(path.parent / "atlas" / "atlas.csv").splitlines()) if r.get("name") == run]
    atlas_used = any(r.get("plateau_exit") not in ("", None) for r in arows)
    out = bench.judge(path, explore, rerun=None, tampered={run}, served=forged_shown or atlas_used,
                      expect_message=False, check=noted and not forged_shown and not atlas_used and explore.code == 0)
    out["checked"] = (f"explore exit {explore.code}, a note naming the table: {'yes' if noted else 'NO'}, forged "
                      f"plateau shown: {'YES' if forged_shown else 'no'}; atlas exit {atlas.code}, used it: "
                      f"{'YES' if atlas_used else 'no'}")
    return out


def _nan(h, folder: Path) -> None:
    w = folder / "model.safetensors"
    header, body = h.st_read(w)
    _, start, end = h.st_tensor(header, "")
    h.st_write(w, header, body[:start] + struct.pack("<f", float("nan")) * ((end - start) // 4) + body[end:])
    _edit_meta(h, folder, lambda m: None)


def _break(h, path: Path, run: str, how: str) -> None:
    folder = path.parent / "checkpoints" / run
    if how == "nan":
        _nan(h, folder)
        _reseal(h, path, run)
    else:
        w = folder / "model.safetensors"
        w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])


def one_bad_run(h, bench, how: str) -> dict:
    """One run made unusable (``nan``: a NaN weight, every checksum recomputed; ``truncated``:
    its weights file cut in half): the best run of a copy of the reference (atlas, explore,
    analyze-sweep; the atlas measures successful and partial runs only), and one run of the
    small store (timeline). Each command skips it by name, reads the rest, exits 0; the atlas
    counts it as skipped and the other measured runs as measured."""
    from interp.inspect.studies.analysis import classify

    path = bench.copy_ref(f"bad-{how}")
    run = max(sorted(bench.reference), key=lambda r: bench.reference[r][1] or 0.0)
    _break(h, path, run, how)
    measurable = sum(classify(v[1], 5) != "failed" for v in bench.reference.values() if v[1] is not None)
    small = _small(h, bench, f"bad-{how}-small")
    tl_run = sorted(p.name for p in (small.parent / "checkpoints").iterdir())[0]
    _break(h, small, tl_run, how)
    out_dir = path.parent / "out"
    ran = {"atlas": h.interp("atlas", path, "--out", out_dir / "atlas", "--batch-size", "64"),
           "explore": h.interp("explore", path, "--out", out_dir / "explore", "--inputs", "1", "--batch-size", "64"),
           "analyze": h.interp("analyze-sweep", path, "--all", "--json", "--batch-size", "64"),
           "timeline": h.interp("timeline", small, "--out", out_dir / "tl", "--batch-size", "64")}
    counted = re.search(r"(\d+) measured .*?; (\d+) skipped", ran["atlas"].out)
    truthful = counted is not None and (int(counted.group(1)), int(counted.group(2))) == (measurable - 1, 1)
    named = all((tl_run if k == "timeline" else run) in (r.out + r.err) for k, r in ran.items())
    ok_codes = all(r.code == 0 for r in ran.values())
    served = _atlas_served(out_dir / "atlas" / "atlas.csv", run) or f'data-seed="{run}"' in _text(out_dir / "explore" / "index.html")
    served |= tl_run in _text(out_dir / "tl" / "timeline.csv")
    out = bench.judge(path, ran["timeline"], rerun=None, tampered={run, tl_run}, served=served, names=[run, tl_run],
                      check=ok_codes and named and truthful and not served)
    out["checked"] = (f"exit {[r.code for r in ran.values()]} (atlas, explore, analyze-sweep, timeline); the run named "
                      f"by each: {'yes' if named else 'NO'}; atlas counts "
                      f"'{counted.group(0) if counted else '?'}' with {measurable} measurable runs: "
                      f"{'truthful' if truthful else 'WRONG'}")
    return out


def no_checkpoints(h, bench) -> dict:
    """A store without checkpoints (the reference's rows alone, ``interp store rows``: what
    ``--no-checkpoints`` stores): the atlas counts every run it would measure as skipped, none as
    measured; timeline fails with one line naming the store (nothing can be read)."""
    from interp.inspect.studies.analysis import classify

    path = bench.fresh("no-ckpt")
    path.parent.mkdir(parents=True)
    assert h.interp("store", "rows", bench.ref_path, path).code == 0
    measurable = sum(classify(v[1], 5) != "failed" for v in bench.reference.values() if v[1] is not None)
    atlas = h.interp("atlas", path, "--out", path.parent / "atlas", "--batch-size", "64")
    timeline = h.interp("timeline", path, "--out", path.parent / "tl")
    counted = re.search(r"(\d+) measured .*?; (\d+) skipped", atlas.out)
    truthful = counted is not None and (int(counted.group(1)), int(counted.group(2))) == (0, measurable)
    rows = h.snapshot(path)
    out = bench.judge(path, timeline, rerun=None, before=rows, tampered=set(rows), served=False,
                      check=truthful and atlas.code == 0 and timeline.code == 2 and not timeline.traceback)
    out["checked"] = (f"atlas exit {atlas.code}, '{counted.group(0) if counted else '?'}' with {measurable} measurable "
                      f"runs ({'truthful' if truthful else 'WRONG'}); timeline exit {timeline.code}")
    return out


def read_only_store(h, bench) -> dict:
    """The store on a read-only bind mount: atlas with its default output refused in one line
    naming the folder; timeline with --out elsewhere runs (snapshots under --out)."""
    path = _small(h, bench, "ro-readers")
    mount = path.parent.parent / "ro-readers-mount"
    mount.mkdir(exist_ok=True)
    if subprocess.run(["mount", "--bind", path.parent, mount], capture_output=True).returncode or \
            subprocess.run(["mount", "-o", "remount,ro,bind", mount], capture_output=True).returncode:
        subprocess.run(["umount", mount], capture_output=True)
        return dict(skipped="no bind mounts here")
    try:
        atlas = h.interp("atlas", mount / "store.sqlite", "--batch-size", "64")
        out = path.parent.parent / "ro-readers-out"
        timeline = h.interp("timeline", mount / "store.sqlite", "--out", out, "--batch-size", "64")
    finally:
        subprocess.run(["umount", mount])
    snaps = sorted(p.name for p in (out / "snapshots").iterdir()) if (out / "snapshots").is_dir() else []
    named = str(mount) in atlas.err
    result = bench.judge(path, atlas, rerun=None, before=h.snapshot(path), names=[str(mount)],
                         check=atlas.code == 2 and named and timeline.code == 0 and len(snaps) == 2)
    result["checked"] = (f"atlas exit {atlas.code} naming the folder: {'yes' if named else 'NO'}; timeline --out "
                         f"elsewhere exit {timeline.code}, snapshots of {len(snaps)} run(s) under --out")
    return result


def timeline_run_folder(h, bench) -> dict:
    """``interp timeline <store>/checkpoints/<run>`` whose folder holds another run's checkpoint
    (two folders swapped): refused naming the run and folder; no snapshot written into it."""
    path = _small(h, bench, "tl-folder")
    a, b = sorted(p.name for p in (path.parent / "checkpoints").iterdir())
    h.swap_checkpoints(path, a, b)
    folder = path.parent / "checkpoints" / a
    ran = h.interp("timeline", folder, "--out", path.parent / "tl", "--batch-size", "64")
    written = (folder / "timeline").exists()
    out = bench.judge(path, ran, rerun=None, tampered={a, b}, served=ran.code == 0 or written,
                      check=ran.code == 2 and not written and a in ran.err)
    out["checked"] = f"timeline exit {ran.code}; snapshots written into the folder: {'YES' if written else 'no'}"
    return out


def timeline_disk_full(h, bench) -> dict:
    """interp timeline under a file-size limit (16 KiB): one line naming the path; nothing half
    written left in the run folders."""
    path = _small(h, bench, "tl-full")
    ran = h.interp("timeline", path, "--out", path.parent / "tl", "--batch-size", "64", limit_bytes=16 * 1024)
    stale = [p for p in (path.parent / "checkpoints").rglob(".timeline.*")]
    out = bench.judge(path, ran, rerun=None, before=h.snapshot(path), check=ran.code == 2 and not stale)
    out["checked"] = f"exit {ran.code}; temporary timeline folders left: {len(stale)}"
    return out


def timeline_killed(h, bench) -> dict:
    """interp timeline SIGKILLed while it writes snapshots: what it left (``.timeline.tmp-*``)
    is named by store verify and removed by --remove-orphans."""
    path = _small(h, bench, "tl-killed")
    cmd = h.Command("timeline", path, "--out", path.parent / "tl", "--batch-size", "64")
    deadline = time.monotonic() + h.HANG_S
    while not cmd.poll() and time.monotonic() < deadline and not list((path.parent / "checkpoints").rglob(".timeline.tmp-*")):
        time.sleep(0.001)
    cmd.kill()
    cmd.finish()
    stale = list((path.parent / "checkpoints").rglob(".timeline.tmp-*"))
    if not stale:  # the kill missed the write: plant what it leaves, as a kill mid-write would
        (path.parent / "checkpoints" / sorted(bench.reference)[0]).mkdir(exist_ok=True)
        stale = [next((path.parent / "checkpoints").iterdir()) / ".timeline.tmp-0123abcd"]
        stale[0].mkdir()
    verify = h.interp("store", "verify", path)
    named = all(str(p) in verify.err for p in stale)
    removed = h.interp("store", "verify", path, "--remove-orphans")
    gone = not any(p.exists() for p in stale)
    out = bench.judge(path, verify, rerun=None, before=h.snapshot(path), names=[p.name for p in stale],
                      check=named and gone and removed.code == 0)
    out["checked"] = (f"left {len(stale)} temporary folder(s); store verify named them: {'yes' if named else 'NO'}; "
                      f"--remove-orphans removed them: {'yes' if gone else 'NO'}")
    return out


def configs_sigint(h, bench) -> dict:
    """Ctrl-C (SIGINT to the process group) 20 s into loading a configs.py that never returns,
    and 1 s into it (the loader's server still importing): one line, exit 130."""
    folder = h.configs_folder(bench, "sigint", "import time\nwhile True:\n    time.sleep(0.01)\n")
    tries = []
    for delay in (1, 20):
        cmd = h.Command("sweep", folder, "--load-timeout", "300")
        time.sleep(delay)
        if not cmd.poll():
            os.killpg(cmd.pid, signal.SIGINT)
        ran = cmd.finish(timeout=h.HANG_S)
        lines = [line for line in ran.err.splitlines() if line.strip()]
        tries.append((delay, ran.code, len(lines), ran.traceback))
    ok = all(code == 130 and n == 1 and not tb for _, code, n, tb in tries)
    out = bench.judge(bench.ref_path, ran, rerun=None, expect_message=False, check=ok)
    out["checked"] = "; ".join(f"after {d} s: exit {c}, {n} line(s) on stderr, traceback {'YES' if tb else 'no'}"
                               for d, c, n, tb in tries)
    return out


def batch_size(h, bench) -> dict:
    """--batch-size 0 and -5 for probe, explore, atlas, analyze-sweep, timeline: refused before
    any work, one line naming the value."""
    folder = bench.ref_path.parent / "checkpoints" / sorted(bench.reference)[0]
    out_dir = bench.root / "batch"
    commands = {"probe": ("probe", folder), "explore": ("explore", bench.ref_path, "--out", out_dir / "e"),
                "atlas": ("atlas", bench.ref_path, "--out", out_dir / "a"),
                "analyze-sweep": ("analyze-sweep", bench.ref_path), "timeline": ("timeline", folder, "--out", out_dir / "t")}
    codes, said_by = {}, None
    for name, args in commands.items():
        for value in ("0", "-5"):
            ran = h.interp(*args, "--batch-size", value)
            codes[f"{name} {value}"] = ran.code
            if not (ran.code == 2 and f"--batch-size {value}" in ran.err and len(ran.err.strip().splitlines()) == 1):
                said_by = ran
    said_by = said_by or ran
    ok = all(c == 2 for c in codes.values()) and not out_dir.exists()
    out = bench.judge(bench.ref_path, said_by, rerun=None, expect_message=False, check=ok)
    out["checked"] = f"exit 2 and one line naming the value: {sum(c == 2 for c in codes.values())} of {len(codes)}"
    return out


def scenarios(h) -> list:
    """The rows of issue 55 for run.py's table (``h``: run.py's module)."""
    return [
        ("forge-accuracy-row", "a store row edited to accuracy 1.0, its checksum recomputed (atlas, explore, "
         "analyze-sweep, probe of its folder, store verify)", lambda b: [forged_accuracy(h, b, "row")]),
        ("forge-accuracy-config", "a row and its config.json's metrics edited to accuracy 1.0, every checksum "
         "recomputed (the same readers, store verify --measure)", lambda b: [forged_accuracy(h, b, "row+config")]),
        ("swap-shape", "a checkpoint swapped for a d_token-16 model, config.json's train_config and metrics edited to "
         "the row's, every checksum recomputed", lambda b: [swapped_shape(h, b)]),
        ("timeline-manifest", "a timeline's manifest edited (plateau exit 100 -> 6, a loss, a shortened steps list), "
         "its seal recomputed (interp timeline, store verify)", lambda b: [forged_manifest(h, b)]),
        ("timeline-csv", "timeline.csv edited (a run's plateau exit and labels; interp explore, interp atlas)",
         lambda b: [forged_timeline_csv(h, b)]),
        ("nan-readers", "a NaN weight in one run, every checksum recomputed (atlas, explore, analyze-sweep, timeline)",
         lambda b: [one_bad_run(h, b, "nan")]),
        ("truncated-readers", "one truncated checkpoint (atlas, explore, analyze-sweep, timeline)",
         lambda b: [one_bad_run(h, b, "truncated")]),
        ("no-checkpoints-readers", "a store without checkpoints (`interp store rows`, as --no-checkpoints stores; atlas, timeline)",
         lambda b: [no_checkpoints(h, b)]),
        ("read-only-readers", "a read-only store (bind mount): atlas's default output; timeline --out elsewhere",
         lambda b: [read_only_store(h, b)]),
        ("timeline-run-folder", "`interp timeline <store>/checkpoints/<run>` holding another run's checkpoint",
         lambda b: [timeline_run_folder(h, b)]),
        ("timeline-full", "interp timeline under a file-size limit (16 KiB)", lambda b: [timeline_disk_full(h, b)]),
        ("timeline-killed", "interp timeline SIGKILLed while writing snapshots; then store verify (--remove-orphans)",
         lambda b: [timeline_killed(h, b)]),
        ("configs-sigint", "Ctrl-C 1 s and 20 s into loading a configs.py that never returns",
         lambda b: [configs_sigint(h, b)]),
        ("batch-size", "--batch-size 0 and -5 (probe, explore, atlas, analyze-sweep, timeline)",
         lambda b: [batch_size(h, b)]),
    ]
