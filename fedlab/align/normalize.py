"""Word-boundary conventions of the tokenizer families, normalised to one (fedlab/methods/fedmkt/README.md
(FM-4)).

Canonical form: a token that starts a word carries a leading "▁"; a continuation carries nothing.
- SentencePiece (LLaMA, T5): "▁" already marks a word start; byte-fallback pieces "<0x0A>" become the byte.
- Byte-level BPE (GPT-2, OPT, Bloom, Qwen2): each character stands for a byte (GPT-2's byte↔unicode
  table); the token is decoded to text and a leading space becomes "▁" ("Ġwe" → "▁we").
- WordPiece (BERT): every piece that does not start with "##" starts a word ("we" → "▁we", "##ize" → "ize").
The convention of a vocabulary is detected from its tokens, so the kernels take plain string lists.
"""
from __future__ import annotations

import re
from functools import lru_cache

MARK = "▁"
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {c: b for b, c in bytes_to_unicode().items()}


def detect_convention(tokens: list[str]) -> str:
    """'sentencepiece', 'byte_bpe', 'wordpiece' or 'plain' (no markers at all)."""
    has_sp = has_bb = has_wp = False
    for t in tokens:
        if MARK in t:
            has_sp = True
        elif t.startswith("Ġ") or t.startswith("Ċ"):
            has_bb = True
        elif t.startswith("##") and len(t) > 2:
            has_wp = True
    if has_sp:
        return "sentencepiece"
    if has_bb:
        return "byte_bpe"
    if has_wp:
        return "wordpiece"
    return "plain"


def _decode_bytes(token: str) -> str:
    dec = _byte_decoder()
    if not all(c in dec for c in token):
        return token
    try:
        return bytes(dec[c] for c in token).decode("utf-8")
    except UnicodeDecodeError:
        return token  # part of a multi-byte character: keep the raw symbol string


def canonical(token: str, convention: str) -> str:
    """One token in the canonical convention."""
    if convention == "sentencepiece":
        m = _BYTE_PIECE.match(token)
        if m:
            return chr(int(m.group(1), 16))
        return token
    if convention == "byte_bpe":
        text = _decode_bytes(token)
        return MARK + text[1:] if text.startswith(" ") else text
    if convention == "wordpiece":
        if token.startswith("##") and len(token) > 2:
            return token[2:]
        if token.startswith("[") and token.endswith("]"):
            return token           # [CLS], [SEP], …: special tokens stay as they are
        return MARK + token
    return token


def canonical_tokens(tokens: list[str], convention: str | None = None) -> list[str]:
    conv = convention or detect_convention(tokens)
    return [canonical(t, conv) for t in tokens]


def surface(token: str) -> str:
    """The characters a canonical token contributes to the text, whitespace and markers removed (for
    character-span alignment: tokenizers disagree on where spaces go, not on the other characters)."""
    return "".join(token.replace(MARK, " ").split())
