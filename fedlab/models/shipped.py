"""The zoo's shipped weights: every tiny and pico zoo model, built once on the reference machine under pinned
numerics, is part of the repository (`fedlab/models/shipped/<name>/`), so a fresh clone pretrains nothing.

`manifest.json` beside the folders holds, per model, the recipe fingerprint it was built by, the sha256 of its
weights (`fedlab.models.digest.weights_sha256`, the number every record names) and the sha256 and size of every
file, and where it was built (CPU, numerics). A shipped model is used when its fingerprint equals the current
recipe's (`fedlab.models.zoo.fingerprint`); a recipe that changed without new shipped weights is built from
scratch (and a test fails until `fedlab zoo ship NAME` writes them). Each file is checked against the manifest
once per process before it is loaded: a damaged file is one line, never a silently different model.

A leaf module: it imports only the standard library.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent / "shipped"
MANIFEST = "manifest.json"


class ZooError(RuntimeError):
    """A shipped or cached zoo file that is missing or damaged; the message is one line saying what to do."""


def manifest(root: Path | None = None) -> dict:
    """{name: entry} of the shipped models ({} when none are shipped); a damaged manifest is a ZooError. Read
    once per process and file state."""
    path = (root or SHIPPED) / MANIFEST
    if not path.exists():
        return {}
    st = path.stat()
    return _read_manifest(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _read_manifest(path: str, size: int, mtime_ns: int) -> dict:
    try:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or not all(isinstance(v, dict) and "files" in v for v in data.values()):
            raise ValueError("not a {name: {fingerprint, weights_sha256, files}} object")
        return data
    except (ValueError, OSError) as e:
        raise ZooError(f"{path}: the shipped zoo's manifest cannot be read ({e}); restore it with "
                       f"`git checkout -- {Path(path).name}` in {Path(path).parent}") from None


def entry(name: str, root: Path | None = None) -> dict | None:
    return manifest(root).get(name)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=256)
def _checked(path: str, size: int, mtime_ns: int, want: str) -> bool:
    """Whether the file at `path` (as it is now: size and mtime are part of the key) has sha256 `want`."""
    return file_sha256(Path(path)) == want


def problems(name: str, root: Path | None = None) -> list[str]:
    """What is wrong with the shipped files of `name` against the manifest ([] when they are intact)."""
    root = root or SHIPPED
    e = entry(name, root)
    if e is None:
        return [f"{name} is not shipped"]
    return file_problems(root / name, e["files"], "the manifest")


def file_problems(folder: Path, files: dict, recorded: str) -> list[str]:
    """What differs between the files in `folder` and their recorded {name: {bytes, sha256}} (`recorded` names
    the record in the messages); each file hashed once per process and file state."""
    out = []
    for fname, f in sorted(files.items()):
        path = folder / fname
        if not path.is_file():
            out.append(f"{path} is missing")
            continue
        st = path.stat()
        if st.st_size != f["bytes"]:
            out.append(f"{path} has {st.st_size} bytes, {recorded} {f['bytes']}")
        elif not _checked(str(path), st.st_size, st.st_mtime_ns, f["sha256"]):
            out.append(f"{path}'s sha256 differs from {recorded}'s")
    return out


def verified_dir(name: str, root: Path | None = None) -> Path:
    """The folder of shipped model `name`, its files checked against the manifest (once per process and
    file state); a damaged or missing file is a ZooError naming it and the way out."""
    root = root or SHIPPED
    bad = problems(name, root)
    if bad:
        raise ZooError(f"zoo: shipped model {name}: {bad[0]}"
                       + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                       + f"; restore it with `git checkout -- {root / name}` (or rebuild from the recipe: "
                         f"`fedlab zoo build {name} --rebuild`)")
    return root / name


def ship(name: str, built: Path, meta: dict, root: Path | None = None) -> dict:
    """Copy the built folder of `name` into the shipped zoo and write its manifest entry (for maintainers,
    after a recipe change: `fedlab zoo ship NAME`)."""
    root = root or SHIPPED
    out = root / name
    tmp = root / f".{name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(built, tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    files = {p.name: {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in sorted(out.iterdir())
             if p.is_file()}
    e = {"fingerprint": meta["fingerprint"], "weights_sha256": meta["weights_sha256"], "params": meta.get("params"),
         "final_loss": meta.get("final_loss"), "build_seconds": meta.get("seconds"), "built_on": meta.get("built_on"),
         "files": files}
    data = dict(manifest(root))
    data[name] = e
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return e
