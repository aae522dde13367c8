"""FedMKT's token alignment of one text tokenized two ways (paper Appendix B step 2;
fedlab/methods/fedmkt/README.md (FM-5))."""
from __future__ import annotations

from fedlab.align.normalize import canonical_tokens, surface


def _spans(tokens: list[str]) -> tuple[str, list[tuple[int, int]]]:
    text, spans, pos = [], [], 0
    for t in tokens:
        s = surface(t)
        spans.append((pos, pos + len(s)))
        text.append(s)
        pos += len(s)
    return "".join(text), spans


def _char_map(a: str, b: str) -> list[int]:
    """For each character of `a`, the character of `b` it is aligned to (−1: deleted) by a minimum-cost
    monotone edit alignment (rapidfuzz's Levenshtein opcodes; the identity when the texts agree)."""
    if a == b:
        return list(range(len(a)))
    from rapidfuzz.distance import Levenshtein

    out = [-1] * len(a)
    for op in Levenshtein.opcodes(a, b):
        if op.tag in ("equal", "replace"):
            for k in range(op.src_end - op.src_start):
                out[op.src_start + k] = op.dest_start + k
    return out


def align_sequences(src: list[str], tgt: list[str]) -> list[tuple[int, int]]:
    """The 1-to-1 matched (src_pos, tgt_pos) pairs of a minimum-cost monotone alignment.

    Both token lists spell the same text, so tokens are placed on the character axis of the text with the
    word-boundary markers and whitespace removed; a source token is matched to the target token that covers
    exactly the same characters. Where the two texts differ after normalisation, characters are first
    aligned by a monotone edit-distance programme and spans are compared through that alignment; a span
    that is cut, merged or partly unaligned (e.g. 'util'+'ize' against 'utilize') has no 1-to-1 partner."""
    src_text, src_spans = _spans(canonical_tokens(list(src)))
    tgt_text, tgt_spans = _spans(canonical_tokens(list(tgt)))
    by_span = {}
    for j, (s, e) in enumerate(tgt_spans):
        if e > s:
            by_span.setdefault((s, e), j)
    cmap = _char_map(src_text, tgt_text)
    pairs, used = [], set()
    for i, (s, e) in enumerate(src_spans):
        if e <= s:
            continue
        m = cmap[s:e]
        if m[0] < 0 or any(m[k + 1] != m[k] + 1 for k in range(len(m) - 1)):
            continue
        j = by_span.get((m[0], m[-1] + 1))
        if j is not None and j not in used:
            used.add(j)
            pairs.append((i, j))
    return pairs


def next_token_pairs(pairs: list[tuple[int, int]], lengths: tuple[int, int] | None = None,
                     ) -> list[tuple[int, int]]:
    """Logit positions that predict the same thing (fedlab/methods/fedmkt/README.md (FM-5)): the logits at
    position p predict token p + 1, so teacher position i pairs with student position j when tokens i + 1 and
    j + 1 are matched in `pairs` (they cover the same characters). `lengths` = (n_teacher, n_student) when
    both texts end at their last token (e.g. both end with EOS, whose span is empty): the positions before the
    two last tokens pair too, since both predict the end of the answer."""
    out = [(i - 1, j - 1) for i, j in pairs if i >= 1 and j >= 1]
    if lengths is not None and lengths[0] >= 2 and lengths[1] >= 2:
        last = (lengths[0] - 2, lengths[1] - 2)
        if all(a != last[0] and b != last[1] for a, b in out):
            out.append(last)
    return sorted(out)
