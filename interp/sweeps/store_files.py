"""The files around a results store that SQLite does not manage: the checkpoint folders, the
driver's lock and its pid file, and the first bytes a store must start with.

Checkpoint folders are written into a temporary sibling, fsynced and renamed into place
(:func:`interp.training.files.place_checkpoint`), so a reader sees a whole folder or none;
:func:`clean_partial` removes what an interrupted driver left.

The lock. One driver writes a store's folder at a time: it holds an ``flock`` on the folder
itself (an fd opened with ``O_DIRECTORY``) for its whole life. Not on ``<store>.lock``: a lock
on a file is only as good as the file's name, and deleting ``store.sqlite.lock`` during a sweep
let a second driver create a new file, lock that, and train the same runs beside the first. A
folder that holds a store cannot be deleted from under it, and every driver of the store opens
the same folder inode. The folder is also the right granularity: the stores of one folder share
its ``checkpoints/`` and ``progress/``, which a driver cleans of what it did not plan. An
``flock`` vanishes with its process however it dies (SIGKILL included), so the lock of a dead
driver is taken over by the next one with nothing to clean up.

``<store>.lock`` holds the holder's pid, only to name it in the refusal message: absent, stale
or garbage, it changes nothing. It is opened with ``O_NOFOLLOW`` and must be a plain file with
one link, so a symlink (or hard link) planted there is refused, naming it, instead of having its
target truncated; the holder removes it on a clean exit.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from pathlib import Path
from urllib.parse import quote

from interp.training.files import place_checkpoint, replace_folder, write_synced  # noqa: F401 - re-exported

SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_uri(path: str | os.PathLike, mode: str, *, immutable: bool = False) -> str:
    """An SQLite ``file:`` URI for ``path`` (``mode``: ``ro`` or ``rwc``); percent-encoding the
    path's bytes keeps names with ``?``, ``#``, ``%`` or bytes that are not UTF-8 intact.
    ``immutable``: read the file as it is, taking no lock and creating no file beside it."""
    return f"file:{quote(os.fsencode(os.path.abspath(path)))}?mode={mode}" + "&immutable=1" * immutable


def real_path(path: str | os.PathLike, what: str = "store") -> Path:
    """``path`` absolute with every symbolic link followed, once, where a command starts: the one
    rule by which the sweep driver (its lock on the folder, the store, its checkpoints and
    progress files) and every reader name a store given through a link: its real file, in its
    real folder. A path that does not exist yet has its existing part resolved (a dangling link
    is followed to the file it names). A loop of links is a ValueError naming ``path``."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        pass
    except OSError as e:
        raise ValueError(f"{what} {path}: its symbolic links cannot be followed ({e.strerror or e})") from None
    real = Path(os.path.realpath(path, strict=False))
    if real.is_symlink():  # a loop realpath gave up on
        raise ValueError(f"{what} {path}: its symbolic links cannot be followed (a loop of links)")
    return real


def sqlite_quiet(path: Path) -> bool:
    """Whether no SQLite file lies beside ``path`` (no ``-journal``, no ``-wal``): no writer is
    mid-transaction and nothing waits to be rolled back or checkpointed, so the file alone says
    what it holds."""
    return not any(Path(f"{path}{suffix}").exists() for suffix in ("-journal", "-wal"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def clean_partial(checkpoints: Path) -> list[Path]:
    """Remove temporary folders that an interrupted driver left under ``checkpoints``."""
    removed = []
    if Path(checkpoints).is_dir():
        for p in Path(checkpoints).iterdir():
            if p.name.startswith(".") and (".tmp-" in p.name or ".old-" in p.name):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


def check_header(path: Path) -> None:
    """SQLite would take a short non-empty file of any bytes for a new database and overwrite
    it, and an empty file for a new database; a store either does not exist yet or starts with
    SQLite's 16-byte header (a 0-byte store is one that lost its content, e.g. on a full disk:
    treating it as new would silently retrain everything)."""
    if not path.is_file():
        return
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes): not a results store, or one that lost its "
                         "content; move it away to start a new store there")
    with open(path, "rb") as f:
        if f.read(16) != SQLITE_HEADER:
            raise ValueError(f"{path} is not a results store: not an SQLite file")


class DriverLock:
    """The lock held by the one driver writing a store (see the module docstring): a second
    ``interp sweep`` on the store, or on another store of its folder, fails at once naming the
    holder's pid."""

    def __init__(self, store_path: str | os.PathLike):
        self.store = real_path(store_path)  # a link: the lock is on its real folder
        self.path = Path(str(store_path) + ".lock")  # the pid file
        self._fd: int | None = None  # the folder's, holding the flock
        self._written: tuple[int, int] | None = None  # (device, inode) of the pid file we wrote

    def __enter__(self) -> "DriverLock":
        import fcntl

        folder = self.store.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ValueError(self._refusal()) from None
            except OSError as e:  # a file system without locks (some network mounts)
                raise OSError(e.errno, f"cannot lock the folder: {e.strerror}", str(folder)) from None
            self._write_pid()
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is None:
            return
        try:  # while the lock is still held: no other driver writes the pid file meanwhile
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._written:
                os.unlink(self.path)
        except OSError:
            pass  # gone already, or a read-only folder: a stale pid file is harmless
        finally:
            os.close(self._fd)  # releases the flock
            self._fd = None

    def _write_pid(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):  # a symlink, folder, FIFO
                raise ValueError(self._not_plain()) from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise ValueError(self._not_plain())
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            self._written = (st.st_dev, st.st_ino)
        finally:
            os.close(fd)

    def _not_plain(self) -> str:
        return (f"{self.path} is not a plain file of its own (a symbolic link, hard link, folder "
                "or FIFO): the driver's pid file is never followed; remove it and rerun")

    def _refusal(self) -> str:
        """The message for a refused driver: the live holder named by a pid file of the folder,
        this store's first (its holder may be driving another store of the same folder)."""
        others = sorted(p for p in self.store.parent.glob("*.lock") if p != self.path)
        for lock in (self.path, *others):
            pid = _read_pid(lock)
            if pid is not None and _alive(pid):
                held = Path(str(lock)[: -len(".lock")])
                break
        else:
            pid, held = "?", self.store
        if held == self.store:
            return (f"another driver (pid {pid}) is writing {self.store}; wait for it or stop it "
                    "(one driver per store)")
        return (f"another driver (pid {pid}) is writing {held}, in the folder of {self.store} "
                "(its stores share checkpoints/ and progress/); wait for it or stop it "
                "(one driver per folder)")


def _read_pid(path: Path) -> int | None:
    """The pid in a pid file, or None (absent, not a plain file, garbage); never follows a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 32).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(text) if text.isdigit() and int(text) > 0 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except (OverflowError, OSError):
        return False
    return True
