"""The files a config points at, and reading them so that a bad one ends in one line.

Paths. A relative input path written in a YAML (`data.public_path`, `data.hf_dir`, a method's file fields such
as Floe's `method.profile`, `plugins`) is relative to that YAML's folder; one given on the command line is
relative to the working directory. Either is stored in the config in one canonical form: relative to the
repository root when the file lies inside it (so a config's identity, `run_key`, is the same on every machine
and from every working directory), absolute otherwise. `input_path` turns a stored value back into a path.
Outputs (`output_dir`, `tracking.uri`) stay relative to where the command runs.

Reading. `read_json` returns the parsed file or raises `FileProblem` — a `ConfigError`, so the CLI prints it
as one line — naming the config key that pointed at the file, the file, what is wrong and what to do. A leaf
module: it imports nothing of fedlab's but `validation`."""
from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from fedlab.validation import ConfigError

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def file_lock(path: Path, optional: bool = False):
    """An exclusive advisory lock on `path` for the block (POSIX flock; without fcntl, no lock), for files that
    several fedlab processes write: a table's records, a new MLflow store. `optional`: where the lock file cannot
    be made or locked (a read-only folder, a file system without flock), the block runs without it."""
    try:
        import fcntl
    except ImportError:          # not POSIX: one process per file
        yield
        return
    f = None
    try:
        f = open(path, "a")
        fcntl.flock(f, fcntl.LOCK_EX)
    except OSError:
        if f is not None:
            f.close()
        if not optional:
            raise
        yield
        return
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader, or a process killed at any moment, sees either the old file or the
    new one, never a truncated one: written beside it (`.NAME.PID.THREAD.tmp`), then renamed over it. A write
    that fails (a full disk, a folder that cannot be written) removes its temporary file and raises the OSError."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):      # the write's own error is the one to report
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def run_lock(folder: Path):
    """Hold a run's folder for the block: an exclusive lock, keyed by the folder's absolute path, that a second
    run of the same config and seed (or its resume) on this machine cannot take while the first runs — it is
    refused in one line naming the holder. The lock goes with the process, however it ends (POSIX flock; without
    fcntl, no lock)."""
    import datetime
    import os

    try:
        import fcntl
    except ImportError:
        yield
        return
    import hashlib
    import tempfile

    folder = Path(folder)
    # the lock lives in the machine's temporary folder, keyed by the run folder's absolute path: nothing is
    # written into output_dir before the run itself writes there
    locks = Path(tempfile.gettempdir()) / "fedlab-run-locks"
    locks.mkdir(parents=True, exist_ok=True)
    f = open(locks / f"{hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:24]}.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise ConfigError(f"output_dir: {folder} is held by {holder}: the same config and seed are running; wait "
                          "for that run to end, or give this one another output_dir or seed") from None
    try:
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} since {datetime.datetime.now().isoformat(timespec='seconds')}\n")
        f.flush()
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


class FileProblem(ConfigError):
    """A file fedlab was pointed at is missing, damaged or of the wrong shape (one line: key, file, fix)."""


def canonical(path: Path) -> str:
    """`path` (absolute) relative to the repository root when it lies inside it, else absolute; POSIX form."""
    path = path.resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def anchored(value: Any, base: Path) -> Any:
    """A path string as written in a file in folder `base` (or on the command line: `base` is the working
    directory) in its canonical stored form; anything but a non-empty string is returned as it is."""
    if not isinstance(value, str) or not value.strip():
        return value
    p = Path(value).expanduser()
    return canonical(p if p.is_absolute() else base / p)


def input_path(value: str | Path) -> Path:
    """The file a stored config value names (relative values are relative to the repository root)."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else ROOT / p


def problem(key: str | None, path: Path | str, what: str, fix: str) -> FileProblem:
    where = f"{key}: " if key else ""
    return FileProblem(f"{where}{path}: {what}; {fix}")


def read_text(path: Path | str, key: str | None = None, fix: str = "check the path") -> str:
    """The file's text; a missing, unreadable or non-UTF-8 file is a FileProblem."""
    path = Path(path)
    if not path.exists():
        raise problem(key, path, "no such file", fix)
    if not path.is_file():
        raise problem(key, path, "is not a file", fix)
    try:
        return path.read_text()
    except UnicodeDecodeError as e:
        raise problem(key, path, f"is not UTF-8 text (byte {e.start})", fix) from None
    except OSError as e:
        raise problem(key, path, f"cannot be read ({e.strerror})", fix) from None


def read_json(path: Path | str, key: str | None = None, fix: str = "check the path",
              shape: type | tuple[type, ...] = dict, what: str = "JSON") -> Any:
    """The parsed JSON file; missing, empty, cut short or not of type `shape` at top level is a FileProblem."""
    text = read_text(path, key, fix)
    if not text.strip():
        raise problem(key, path, f"is empty (expected {what})", fix)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise problem(key, path, f"is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}; a file cut "
                                 "short?)", fix) from None
    if not isinstance(data, shape):
        names = " or ".join(t.__name__ for t in (shape if isinstance(shape, tuple) else (shape,)))
        raise problem(key, path, f"holds a JSON {type(data).__name__}, not the {names} of {what}", fix)
    return data
