"""Models a method derives from other models (Co-PLMs' distilled proxy model), cached on disk under the
hash of everything that built them and loaded by name like a zoo model: `derived:<digest>`.

A derived model is a Hugging Face folder (weights, config, tokenizer) in `$FEDLAB_HOME/derived/<digest>/`
with a `meta.json` holding its recipe (the inputs' fingerprints and weights' sha256, the method's settings,
the data it was trained on, fedlab's version) and its own weights' sha256. The digest is the recipe's
hash, so a changed input gives another name, never a stale model. Every process that loads the name (Ray
workers included) reads the same folder: on a multi-node cluster `$FEDLAB_HOME` must be shared."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from fedlab.home import fedlab_home
from fedlab.models.digest import weights_sha256

PREFIX = "derived:"


def is_derived(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def digest_of(recipe: dict) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:16]


def derived_dir(digest: str) -> Path:
    return fedlab_home() / "derived" / digest


def derived_name(recipe: dict) -> str:
    return PREFIX + digest_of(recipe)


def derived_path(name: str) -> Path:
    """The folder of a derived model; a missing one is a one-line error naming what would build it."""
    path = derived_dir(name[len(PREFIX):])
    if not (path / "meta.json").exists():
        raise FileNotFoundError(f"model {name!r} is not in {path.parent} (a derived model is built by the method "
                                "that names it, e.g. Co-PLMs' distilled proxy; on a cluster FEDLAB_HOME must be "
                                "shared by every node)")
    return path


def read_derived_meta(name: str) -> dict:
    """meta.json of a derived model ({} when missing or damaged: it is a cache, built again)."""
    path = derived_dir(name[len(PREFIX):]) / "meta.json"
    try:
        meta = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def exists(recipe: dict) -> bool:
    """A derived model of this recipe is built here (its meta.json readable: a damaged one is built again)."""
    return bool(read_derived_meta(PREFIX + digest_of(recipe)))


def save_derived(model, tokenizer, recipe: dict, extra: dict | None = None) -> str:
    """Save `model` and `tokenizer` under the recipe's digest (atomically: written beside, then renamed)
    and return the model's name."""
    digest = digest_of(recipe)
    out = derived_dir(digest)
    tmp = out.with_name(f".{digest}.{os.getpid()}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    meta = {"name": PREFIX + digest, "recipe": recipe, "weights_sha256": weights_sha256(model.state_dict()),
            **(extra or {})}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    if out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return PREFIX + digest
