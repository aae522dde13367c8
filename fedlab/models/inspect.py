"""Facts about a model read from its config file only (no weights, no torch): for config validation."""
from __future__ import annotations

import os
from pathlib import Path

_ZOO_BLOCKS = {"tiny-llama": 6, "tiny-llama-deep": 12, "tiny-llama-s": 4, "pico-llama-s": 2, "tiny-gpt2": 4, "tiny-opt": 4, "tiny-bloom": 4, "tiny-qwen2": 4,
               "pico-llama": 4, "pico-gpt2": 2, "pico-opt": 2, "pico-bloom": 2, "pico-qwen2": 2,
               "tiny-bert": 6, "pico-bert": 3, "smollm2-135m": 30, "minilm-l6": 6}


def looks_local(name: str) -> bool:
    """A model name meant as a folder (./x, /x, ~/x, a/b/c) rather than a zoo name or a Hub id (org/name)."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1


def num_blocks(name: str) -> int | None:
    """Decoder blocks of a zoo model or a local folder; None when unknown without loading."""
    if name in _ZOO_BLOCKS:
        return _ZOO_BLOCKS[name]
    cfg = Path(os.path.expanduser(name)) / "config.json"
    if cfg.exists():
        from fedlab.files import read_json

        c = read_json(cfg, "model.name", "the folder is not a complete Hugging Face model; save it again with "
                      "save_pretrained", dict, "a model config")
        for key in ("num_hidden_layers", "n_layer", "num_layers"):
            if key in c:
                return int(c[key])
    return None
