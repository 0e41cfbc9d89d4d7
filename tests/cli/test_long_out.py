"""Issue 43: an ``--out`` too long for the file system is refused before any work, by every
command that takes one (the CLI's entry point checks it), in one line naming the path."""

import pytest

from interp import cli


@pytest.mark.parametrize("argv", [
    ["atlas", "{store}"], ["explore", "{store}"], ["report", "{store}"], ["curves", "{store}"],
    ["analyze-sweep", "{store}"], ["viz", "--construction", "3", "--n", "4"],
])
def test_an_overlong_out_is_refused_in_one_line(argv, tmp_path, capsys):
    out = tmp_path / ("x" * 242) / ("y" * 242)  # each name fits; the temporary names do not
    argv = [a.format(store=tmp_path / "nowhere") for a in argv] + ["--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {out}" in err[0] and "accepted: at most" in err[0], err
    assert not out.parent.exists()  # nothing made
