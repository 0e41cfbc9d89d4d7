"""Output files written whole or not at all: :func:`write_file` and :func:`save_figure`; and
folders the same way (:func:`place_checkpoint`, :func:`replace_folder`, :func:`write_synced`).

Every file a command writes for the reader (``report.md``, ``violins.png``, the explorer's pages
and figures, the analysis files) goes through :func:`write_file`, because writing in place can
lie in two ways:

* a fault mid-write (a full disk, a file-size limit, a kill) leaves a truncated file where a good
  one was, and nothing says so: a half PNG still opens as a picture with a grey bottom;
* a fixed temporary name (``report.md.tmp``) or the target itself may be a symlink someone left
  there, and opening it for writing writes through the link into whatever file it points at.

So the bytes go into a new file of a random name beside the target, created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` (it cannot exist before, so it cannot be a link), are
fsynced, and the file is renamed onto the target with ``os.replace``: a symlink *at* the target
is replaced by the file, never written through, and a reader sees the old file or the new one.
On any ``OSError`` the temporary file is removed, the target is left as it was, and the error
becomes a one-line ``ValueError`` that names the target and what to do.

Figures are rendered into memory first (:func:`save_figure`), so matplotlib never writes a file
itself.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import secrets
import shutil
import stat
import sys
import uuid
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def problem(path, e: OSError) -> str:
    """One line for an OSError met while writing ``path``: the path, the cause, what to do."""
    cause = e.strerror or str(e)
    if e.errno in (errno.EACCES, errno.EPERM):
        return (f"{path}: permission denied ({cause}); make it and its folder writable by this "
                "user, or write elsewhere (--out)")
    if e.errno == errno.EROFS:
        return f"{path}: the file system is read-only ({cause}); write elsewhere (--out)"
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{path}: the disk is full ({cause}); free space and rerun"
    if e.errno == errno.EFBIG:
        return (f"{path}: the file is over this process's file-size limit or the disk is full "
                f"({cause}); raise the limit (ulimit -f) or free space and rerun")
    return f"{path}: {cause}"


#: bytes the temporary names made from a name add to it at most: ``.{name}.{12 hex}.tmp``
#: (:func:`write_file`, ``interp store rows``), ``.{name}.tmp-{8 hex}`` and ``.{name}.old-{8 hex}``
#: (folders placed whole: a checkpoint, an ``interp train`` folder)
NAME_EXTRA = 18
#: room kept below a folder a command is given, for what it writes inside
#: (``checkpoints/.{run}.tmp-{8 hex}/model.safetensors``, ``progress/...``: under 64 bytes)
INSIDE = 64
#: the longest path SQLite opens here, its ``-journal`` beside it included (the unix VFS's
#: 512 bytes less ``-journal`` and the final NUL)
SQLITE_PATH_MAX = 503


def check_name_length(path, what: str = "--out", *, sqlite_file: str | None = None) -> None:
    """Refuse, before any work, a ``path`` the file system (or SQLite) cannot hold once the
    command's own names are added: a name (path component) over the file system's limit
    (``PC_NAME_MAX``, 255 bytes on most), a last name over it once a temporary name is made from
    it (:data:`NAME_EXTRA`), a whole path over ``PC_PATH_MAX`` with room for what is written
    inside (:data:`INSIDE`), and, where the command writes an SQLite file at ``path`` +
    ``sqlite_file`` (``""``: ``path`` is the store; ``"/store.sqlite"``: a store inside the
    folder), over :data:`SQLITE_PATH_MAX` once a temporary name is made from it. A ValueError of
    one line names ``path``, its length and the limit."""
    raw = os.fsencode(os.path.abspath(path))
    probe = Path(os.path.abspath(path))
    while not os.path.exists(probe) and probe != probe.parent:  # os.path: a name too long is False
        probe = probe.parent
    name_max, path_max = (_pathconf(probe, key, default) for key, default in
                          (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)))
    for part in raw.split(b"/"):
        if len(part) > name_max:
            raise ValueError(f"{what} {path}: a name in it is {len(part)} bytes, over this file system's "
                             f"{name_max}; accepted: at most {name_max - NAME_EXTRA} bytes a name")
    last = len(os.fsencode(Path(path).name))
    if last + NAME_EXTRA > name_max:
        raise ValueError(f"{what} {path}: its last name is {last} bytes; the temporary names made from it "
                         f"add {NAME_EXTRA}, over this file system's {name_max}; accepted: at most "
                         f"{name_max - NAME_EXTRA} bytes")
    if len(raw) + NAME_EXTRA + INSIDE > path_max:
        raise ValueError(f"{what} {path}: the path is {len(raw)} bytes; with the names written in it, "
                         f"over this system's {path_max}; accepted: at most {path_max - NAME_EXTRA - INSIDE} bytes")
    if sqlite_file is not None:
        need = len(raw) + NAME_EXTRA + len(os.fsencode(sqlite_file))
        if need > SQLITE_PATH_MAX:
            room = SQLITE_PATH_MAX - NAME_EXTRA - len(os.fsencode(sqlite_file))
            raise ValueError(f"{what} {path}: the path is {len(raw)} bytes; SQLite opens a store's path of "
                             f"at most {SQLITE_PATH_MAX} bytes, its temporary names included; accepted: "
                             f"at most {room} bytes (absolute)")


def _pathconf(path: Path, key: str, default: int) -> int:
    try:
        return int(os.pathconf(path, key))
    except (OSError, ValueError, AttributeError):
        return default


def write_file(path, data: bytes | str, *, encoding: str = "utf-8") -> Path:
    """Put ``data`` at ``path`` whole, or leave ``path`` as it was (see the module docstring).

    Folders are created. An existing regular file's permission bits are kept; a new file gets
    the usual ``0o666`` less the umask. Returns ``path``; any OSError is a ValueError naming it.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode(encoding)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_beside(path)
        try:
            _keep_mode(fd, path)
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        tmp = None
        _sync_folder(path.parent)
    except OSError as e:
        raise ValueError(problem(path, e)) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def write_files(contents: dict) -> list[Path]:
    """Write a set of files together (``{path: bytes or str}``): every file goes to its own new
    temporary file beside its target first (as :func:`write_file` does), and only when every one
    is written and synced are they renamed onto their targets, in order. Any OSError before the
    renames removes the temporaries and leaves every target as it was (a file-size limit or a
    full disk hit by the third file leaves no new first two beside old figures); a ValueError
    names the file. Returns the paths."""
    done: list[tuple[str, Path]] = []
    try:
        for path, data in contents.items():
            path = Path(path)
            data = data.encode("utf-8") if isinstance(data, str) else data
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = _create_beside(path)
            done.append((tmp, path))
            try:
                _keep_mode(fd, path)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as e:
        for tmp, _ in done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ValueError(problem(done[-1][1] if done else Path("."), e)) from None
    for tmp, path in done:
        os.replace(tmp, path)
    for folder in {path.parent for _, path in done}:
        _sync_folder(folder)
    return [path for _, path in done]


def figure_bytes(fig, suffix: str = ".png", *, close: bool = False, **savefig_kw) -> bytes:
    """The matplotlib figure ``fig`` rendered in memory (for :func:`write_files`)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix.lstrip(".") or "png", **savefig_kw)
    plt = sys.modules.get("matplotlib.pyplot")
    if close and plt is not None:
        plt.close(fig)
    return buf.getvalue()


def save_figure(fig, path, *, close: bool = False, **savefig_kw) -> Path:
    """Render the matplotlib figure ``fig`` in memory (format from ``path``'s suffix,
    :func:`figure_bytes`) and :func:`write_file` it; ``close`` also lets pyplot forget the figure
    (one made with ``plt.subplots`` is otherwise kept alive by pyplot). Returns ``path``."""
    path = Path(path)
    return write_file(path, figure_bytes(fig, path.suffix, close=close, **savefig_kw))


def _create_beside(path: Path) -> tuple[int, str]:
    """A new, empty file ``.<name>.<random>.tmp`` in ``path``'s folder: (descriptor, name)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, _FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name beside the file", str(path))


def _keep_mode(fd: int, path: Path) -> None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))


def _sync_folder(folder: Path) -> None:
    """fsync the folder so the rename itself survives a power cut (best effort: some file
    systems refuse to open or sync a folder, and the file is already in place)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def place_checkpoint(files: dict[str, bytes], target: Path) -> dict[str, str]:
    """Write a checkpoint folder atomically: into a temporary sibling, fsync, then rename.

    An existing ``target`` (left by a run that was killed before its row was committed) is
    replaced. Returns ``{file name: sha256}``.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for fname, data in files.items():
            if "/" in fname or fname.startswith("."):
                raise ValueError(f"checkpoint file name {fname!r}; accepted: a plain file name")
            write_synced(tmp / fname, data)
        replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {fname: hashlib.sha256(data).hexdigest() for fname, data in sorted(files.items())}


def write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it (a folder is renamed into place only after)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def replace_folder(tmp: Path, target: Path) -> None:
    """Put the finished folder ``tmp`` at ``target`` by renames: an existing ``target`` is moved
    aside first and removed after, so a reader sees the old folder or the new, never a mix."""
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


def write_or_check(path, text: str, argv: list[str], command: str) -> tuple[int, str]:
    """A report script's ending, as ``(exit code, what to print)``: with ``argv == ["--check"]``,
    0 if ``path`` holds ``text`` and 1 (saying to run ``command``) if not, writing nothing;
    otherwise ``path`` is written and the text is what to print."""
    path = Path(path)
    if argv == ["--check"]:
        same = path.exists() and path.read_text() == text
        return (0, f"{path.name} is current") if same else (1, f"{path.name} is stale: run {command}")
    write_file(path, text)
    return 0, text
