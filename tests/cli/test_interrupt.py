"""Ctrl-C prints one line in every command, exit 130 (issue 43: atlas, explore and report printed
a 17-79 line traceback): once, in the CLI's entry point."""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
import time

import pytest

from interp import cli


@pytest.mark.parametrize("command", ["atlas", "explore", "report", "store", "runs", "verify", "probe"])
def test_keyboard_interrupt_is_one_line_and_130(command, monkeypatch, capsys):
    module = importlib.import_module(cli.COMMANDS[command][0])

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run", interrupted)
    argv = {"atlas": ["atlas", "x"], "explore": ["explore", "x", "--out", "y"], "report": ["report", "x"],
            "store": ["store", "verify", "x"], "runs": ["runs", "x"], "verify": ["verify"],
            "probe": ["probe", "x"]}[command]
    try:
        code = cli.main(argv)
    except SystemExit as e:  # a parser that needs other arguments: not what this test is about
        pytest.skip(f"arguments: {e}")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130 and len(err) == 1 and err[0].startswith(f"interp {command}: interrupted"), err


def test_sigint_in_a_real_process_prints_one_line():
    """A real SIGINT to ``python -m interp verify`` while it works: one line on stderr, 130."""
    import threading

    # SIGINT back to its default in the child: a shell ignores it for its background jobs (a CI
    # run started with &), and an ignored signal is inherited, so Python would never see it
    proc = subprocess.Popen([sys.executable, "-m", "interp", "verify"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen, started = [], threading.Event()

    def read():  # stderr as it comes; the bar's first frame means imports are done
        for chunk in iter(lambda: proc.stderr.read1(4096), b""):
            seen.append(chunk)
            if b"verify:" in b"".join(seen):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started.wait(timeout=300)  # on loaded cores the imports alone can take many seconds
    time.sleep(1)
    if proc.poll() is not None:
        pytest.skip("interp verify finished before the signal")
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    err = b"".join(seen).decode(errors="replace").replace("\r", "\n")
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert lines[-1].startswith("interp verify: interrupted"), lines


def _forkserver_importing(pid: int) -> bool:
    """Whether a multiprocessing forkserver started by process ``pid`` (or its children) runs."""
    from pathlib import Path

    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and b"multiprocessing.forkserver" in (d / "cmdline").read_bytes() \
                    and int((d / "stat").read_text().rsplit(")", 1)[1].split()[3]) == pid:
                return True
        except (OSError, IndexError, ValueError):
            pass
    return False


@pytest.mark.parametrize("when", ["server importing", "configs.py looping"])
def test_ctrl_c_while_a_configs_py_loads_is_one_line(tmp_path, when):
    """Issue 55: Ctrl-C (to the whole process group, as a terminal sends it) while the loader's
    forkserver imports torch, or while a configs.py that never returns runs in the loader's
    child: one line, exit 130, no traceback from either process."""
    folder = tmp_path / "loop"
    folder.mkdir()
    (folder / "configs.py").write_text("import time\nwhile True:\n    time.sleep(0.01)\n")
    proc = subprocess.Popen([sys.executable, "-m", "interp", "sweep", str(folder), "--load-timeout", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not _forkserver_importing(proc.pid):
        time.sleep(0.02)
    # the server spawned, importing torch for seconds; the child runs configs.py once it has imported
    time.sleep(25 if when == "configs.py looping" else 0.5)
    if proc.poll() is not None:
        pytest.skip("the command ended before the signal")
    import os

    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert proc.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], err.decode()[-3000:]
