"""Architecture files of the papers' models (config.json fields only, no weights): `fedlab plan` and the GPU
suite build them on the meta device or with random weights, so their sizes and costs can be known without a
download."""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.json"))


def config(name: str):
    """The transformers config of architecture `name` (one of `names()`)."""
    from transformers import AutoConfig

    path = HERE / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"architecture {name!r} is not shipped; shipped: {', '.join(names())}")
    fields = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}
    return AutoConfig.for_model(fields.pop("model_type"), **fields)
