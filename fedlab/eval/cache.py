"""A cache of task scores on disk, shared by every run on the machine: `$FEDLAB_HOME/eval_cache/`.

Many runs score the very same model on the very same questions: every FedProxy run of a seed evaluates the
untrained proxy at round 0 and the untouched LLM (its zero-shot row) at the end, and a table or a sweep holds
dozens of such runs. A score is stored under a key made of everything that decides it:

    key = sha256(model digest, tokenizer digest, the examples, the scorer's settings, torch threads,
                 torch / transformers versions, device type, SCORER_VERSION)

where the model digest covers the class of every submodule, their scalar attributes (LoRA scaling, merged
flags, ...), the Hugging Face / PEFT configs and every byte of the state dict. Only models whose forward is
set by those alone are cached: a `transformers.PreTrainedModel` or a `peft.PeftModel`; any other wrapper
(proxy tuning, plug-in fusion modules of fedlab's own) is scored every time. A hit returns the numbers the
same computation returned before, bit for bit; `eval.cache: false` turns the cache off for a run.
Bump SCORER_VERSION whenever scoring code changes what it returns."""
from __future__ import annotations

import hashlib
import json
import weakref
from pathlib import Path

import torch

from fedlab.files import write_atomic
from fedlab.home import fedlab_home

SCORER_VERSION = 3     # 2: choice scores carry top/<task>, the most frequent answer's share; 3: EM SNI-normalised

_SCALARS = (bool, int, float, str, type(None))
_TOKENIZER_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
stats = {"hits": 0, "misses": 0}
_SAID: list[str] = []          # a cache that cannot be written is said once per process


def cache_dir() -> Path:
    return fedlab_home() / "eval_cache"


def cacheable(model) -> bool:
    """Whether the model's outputs are determined by what `model_digest` reads."""
    from transformers import PreTrainedModel

    try:
        from peft import PeftModel
    except ImportError:   # pragma: no cover - peft is a dependency
        PeftModel = ()
    return isinstance(model, (PreTrainedModel, PeftModel))


def _plain(value):
    """A JSON-able copy of scalars and containers of scalars; None for anything else (left out)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in (sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value)]
        return items if all(i is not None or v is None for i, v in zip(items, value)) else None
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _plain(v) for k, v in value.items()}
        return items if all(items[k] is not None or value[k] is None for k in value) else None
    return None


def _configs(model) -> list:
    out = []
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_json_string"):
        out.append(config.to_json_string(use_diff=False))
    peft_config = getattr(model, "peft_config", None)
    if isinstance(peft_config, dict):       # sets (target_modules) sorted: their order changes per process
        out.append({name: _sorted_sets(c.to_dict() if hasattr(c, "to_dict") else vars(c))
                    for name, c in sorted(peft_config.items())})
    return out


def _sorted_sets(value):
    if isinstance(value, (set, frozenset)):
        return sorted((_sorted_sets(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): _sorted_sets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sorted_sets(v) for v in value]
    return value


def model_digest(model) -> str:
    """sha256 over the submodules' classes and scalar attributes, the configs and the state dict's bytes."""
    h = hashlib.sha256()
    structure = []
    for name, module in model.named_modules():
        attrs = {k: _plain(v) for k, v in vars(module).items()
                 if not k.startswith("_") and k != "training" and _plain(v) is not None}
        structure.append([name, f"{type(module).__module__}.{type(module).__qualname__}", attrs])
    h.update(json.dumps([structure, _configs(model)], sort_keys=True, default=str).encode())
    for name, tensor in model.state_dict().items():
        t = tensor.detach()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def tokenizer_digest(tokenizer) -> str:
    """sha256 of the tokenizer's full definition (the fast tokenizer's JSON, padding side, special tokens);
    remembered per tokenizer object."""
    try:
        hit = _TOKENIZER_DIGESTS.get(tokenizer)
    except TypeError:
        hit = None
    if hit is not None:
        return hit
    backend = getattr(tokenizer, "backend_tokenizer", None)
    parts = [type(tokenizer).__qualname__, backend.to_str() if backend is not None else repr(tokenizer.get_vocab()),
             tokenizer.padding_side, getattr(tokenizer, "truncation_side", None), str(tokenizer.special_tokens_map),
             getattr(tokenizer, "add_bos_token", None), getattr(tokenizer, "add_eos_token", None)]
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    try:
        _TOKENIZER_DIGESTS[tokenizer] = digest
    except TypeError:
        pass
    return digest


def examples_digest(examples) -> str:
    rows = [[e.prompt, e.target, e.task, list(e.choices) if e.choices is not None else None, e.label]
            for e in examples]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def score_key(model_hash: str, tokenizer, examples, settings: dict, device: str) -> str:
    parts = {"model": model_hash, "tokenizer": tokenizer_digest(tokenizer), "examples": examples_digest(examples),
             "settings": settings, "threads": torch.get_num_threads(), "torch": torch.__version__,
             "transformers": _transformers_version(), "device": device, "scorer": SCORER_VERSION}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def load(key: str) -> dict | None:
    path = cache_dir() / key[:2] / f"{key}.json"
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):       # missing, damaged, not text, a folder: scored again
        return None
    if not isinstance(out, dict):
        return None
    stats["hits"] += 1
    return out


def store(key: str, scores: dict) -> None:
    """Written to a temporary file and renamed: two runs filling the same key leave one whole file."""
    stats["misses"] += 1
    folder = cache_dir() / key[:2]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"{key}.json", json.dumps(scores))
    except OSError as e:      # the cache only saves time: a place that cannot hold the entry costs a re-score
        if not _SAID:
            _SAID.append(str(e))
            import sys

            print(f"[fedlab] eval.cache: cannot write {folder / (key + '.json')} ({type(e).__name__}: {e}); "
                  "scores are computed without the cache where it cannot keep them", file=sys.stderr)
