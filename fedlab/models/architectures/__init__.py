"""Architecture files of the papers' models (config.json fields only, no weights): `fedlab plan` and the GPU
suite build them on the meta device or with random weights, so their sizes and costs can be known without a
download. `architecture(name)` resolves any model name fedlab runs (zoo, paper model, local folder) to its
config; `kept_blocks` is the block count a κ-compression leaves."""
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


# Hugging Face ids of the papers' models → the architecture files shipped in fedlab/models/architectures
HUB_ARCHITECTURES = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b", "mistralai/Mistral-7B-v0.1": "mistral-7b",
    "google/gemma-2b": "gemma-2b", "google/gemma-7b": "gemma-7b", "EleutherAI/gpt-j-6b": "gpt-j-6b",
    "facebook/opt-1.3b": "opt-1.3b", "openai-community/gpt2": "gpt2", "gpt2": "gpt2",
    "openai-community/gpt2-xl": "gpt2-xl", "gpt2-xl": "gpt2-xl", "bigscience/bloom-1b1": "bloom-1b1",
    "Qwen/Qwen2.5-1.5B": "qwen2.5-1.5b", "princeton-nlp/Sheared-LLaMA-1.3B": "sheared-llama-1.3b",
    "bert-base-uncased": "bert-base", "google-bert/bert-base-uncased": "bert-base",
    "sentence-transformers/all-MiniLM-L6-v2": "minilm-l6", "minilm-l6": "minilm-l6",
    "HuggingFaceTB/SmolLM2-135M": "smollm2-135m", "smollm2-135m": "smollm2-135m",
}


def architecture(name: str):
    """The transformers config of a model name: a zoo model (its shipped config.json), a paper model (the
    shipped architecture file), or a local folder's config.json."""
    from transformers import AutoConfig

    from fedlab.models.shipped import SHIPPED as SHIPPED_DIR

    if (SHIPPED_DIR / name / "config.json").is_file():
        return AutoConfig.from_pretrained(SHIPPED_DIR / name)
    if name in HUB_ARCHITECTURES:
        return config(HUB_ARCHITECTURES[name])
    if (Path(name) / "config.json").is_file():
        return AutoConfig.from_pretrained(name)
    raise ValueError(f"model {name!r}: no architecture known to `fedlab plan`; known: the zoo's models, a local "
                     f"folder with a config.json, or one of {', '.join(sorted(HUB_ARCHITECTURES))}")


def kept_blocks(name: str, kappa: float) -> int:
    """Blocks model `name` keeps when block-influence compression drops the fraction κ of them (FedProxy's proxy,
    Co-PLMs' DPM)."""
    from fedlab.transforms.compress import n_dropped

    blocks = int(architecture(name).num_hidden_layers)
    return blocks - n_dropped(blocks, kappa)
