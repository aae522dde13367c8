"""FedMKT's optimal vocabulary mapping (paper Appendix B step 1; fedlab/methods/fedmkt/README.md (FM-4))."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from fedlab.align.normalize import canonical_tokens
from fedlab.home import fedlab_home


def vocab_map(src: list[str], tgt: list[str], chunk: int = 2048) -> list[int]:
    """For each source token, the index of the closest target token: after normalising word-boundary
    markers, an exact string match maps to itself; otherwise the target with the minimum Levenshtein
    distance, ties to the lexicographically smallest target string (canonical form, then raw string).

    Exact matches are a dictionary lookup; the rest is computed by rapidfuzz's C implementation (bit-
    parallel Levenshtein, all cores) over chunks of sources — O(|src|·|tgt|) cheap distance calls, without a
    Python loop over pairs."""
    if not tgt:
        raise ValueError("vocab_map: the target vocabulary is empty")
    src_c, tgt_c = canonical_tokens(list(src)), canonical_tokens(list(tgt))
    order = sorted(range(len(tgt)), key=lambda j: (tgt_c[j], tgt[j]))   # lexicographic tie order
    exact: dict[str, int] = {}
    for j in order:
        exact.setdefault(tgt_c[j], j)
    out = [exact.get(s, -1) for s in src_c]
    todo = [i for i, j in enumerate(out) if j < 0]
    if todo:
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein

        choices = [tgt_c[j] for j in order]
        for start in range(0, len(todo), chunk):
            part = todo[start:start + chunk]
            dist = process.cdist([src_c[i] for i in part], choices, scorer=Levenshtein.distance,
                                 dtype=np.int32, workers=-1)
            best = dist.argmin(axis=1)       # the first minimum = the lexicographically smallest
            for i, b in zip(part, best):
                out[i] = order[int(b)]
    return out


def vocab_tokens(tokenizer) -> list[str]:
    """The tokenizer's vocabulary as a list of token strings indexed by id."""
    vocab = tokenizer.get_vocab()
    out = [""] * (max(vocab.values()) + 1)
    for tok, i in vocab.items():
        out[i] = tok
    return out


def _cache_dir() -> Path:
    return fedlab_home() / "align"


def cached_vocab_map(src_tokenizer, tgt_tokenizer) -> np.ndarray:
    """`vocab_map` of two tokenizers' vocabularies as an int64 array indexed by source id, cached on disk
    per (source vocabulary, target vocabulary) — one file per pair and direction."""
    src, tgt = vocab_tokens(src_tokenizer), vocab_tokens(tgt_tokenizer)
    key = hashlib.sha256(json.dumps([src, tgt]).encode()).hexdigest()[:20]
    path = _cache_dir() / f"vocab_map-{key}.npy"
    if path.exists():
        return np.load(path)
    arr = np.asarray(vocab_map(src, tgt), dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, arr)
    tmp.replace(path)
    return arr
