"""Cross-tokenizer alignment: vocabulary maps, sequence alignment, top-K translation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlab.align import (
    align_sequences,
    cached_vocab_map,
    canonical_tokens,
    detect_convention,
    translate_topk,
    vocab_map,
)

SENTENCE = "we utilize the dynamic programming approach to align tokens"
# the paper's example (Appendix B), with the LLaMA side also splitting "programming"
LLAMA = ["▁we", "▁util", "ize", "▁the", "▁dynamic", "▁program", "ming", "▁approach", "▁to", "▁align", "▁tokens"]
BLOOM = ["we", "Ġutilize", "Ġthe", "Ġdynamic", "Ġprogramming", "Ġapproach", "Ġto", "Ġalign", "Ġtokens"]
SEVEN = ["we", "the", "dynamic", "approach", "to", "align", "tokens"]


def test_paper_sentence_matches_the_seven_identical_tokens_one_to_one():
    pairs = align_sequences(LLAMA, BLOOM)
    words = [(LLAMA[i].lstrip("▁"), BLOOM[j].lstrip("Ġ")) for i, j in pairs]
    assert [a for a, _ in words] == SEVEN
    assert all(a == b for a, b in words)
    # 'util'+'ize' against 'utilize' and 'program'+'ming' against 'programming' have no 1-to-1 partner
    assert 1 not in [i for i, _ in pairs] and 2 not in [i for i, _ in pairs]
    # both directions agree
    assert sorted((j, i) for i, j in align_sequences(BLOOM, LLAMA)) == pairs


def test_wordpiece_and_sentencepiece_conventions_align():
    bert = ["we", "util", "##ize", "the", "dynamic", "programming", "approach", "to", "align", "tokens"]
    pairs = align_sequences(bert, BLOOM)
    assert [bert[i] for i, _ in pairs] == ["we", "the", "dynamic", "programming", "approach", "to", "align", "tokens"]


def test_texts_that_differ_fall_back_to_an_edit_alignment():
    a = ["▁the", "▁colour", "▁of", "▁tokens"]
    b = ["Ġthe", "Ġcolor", "Ġof", "Ġtokens"]        # different spelling in the middle
    pairs = align_sequences(a, b)
    assert (0, 0) in pairs and (2, 2) in pairs and (3, 3) in pairs
    assert all(i == j for i, j in pairs)          # monotone and never crossing


def test_alignment_is_monotone_and_one_to_one_on_random_splits():
    rng = np.random.default_rng(0)
    text = SENTENCE.replace(" ", "")
    for _ in range(50):
        cuts_a = sorted(set(rng.choice(range(1, len(text)), 12, replace=False)))
        cuts_b = sorted(set(rng.choice(range(1, len(text)), 12, replace=False)))
        a = [text[i:j] for i, j in zip([0] + cuts_a, cuts_a + [len(text)])]
        b = [text[i:j] for i, j in zip([0] + cuts_b, cuts_b + [len(text)])]
        pairs = align_sequences(a, b)
        assert all(a[i] == b[j] for i, j in pairs)
        assert [j for _, j in pairs] == sorted({j for _, j in pairs})
        # every token whose span exists on both sides is found
        spans = lambda toks: {(sum(map(len, toks[:k])), sum(map(len, toks[:k + 1]))) for k in range(len(toks))}  # noqa: E731
        assert len(pairs) == len(spans(a) & spans(b))


def test_conventions_are_detected_and_normalised():
    assert detect_convention(["▁we", "ize"]) == "sentencepiece"
    assert detect_convention(["Ġwe", "ize"]) == "byte_bpe"
    assert detect_convention(["we", "##ize"]) == "wordpiece"
    assert canonical_tokens(["▁we", "ize"]) == canonical_tokens(["Ġwe", "ize"]) == canonical_tokens(["we", "##ize"])
    assert canonical_tokens(["Ċ", "Ġwe"]) == ["\n", "▁we"]          # byte-level symbols decode to text
    assert canonical_tokens(["▁a", "<0x0A>"]) == ["▁a", "\n"]         # SentencePiece byte fallback


def test_vocab_map_exact_nearest_and_ties():
    tgt = ["Ġthe", "Ġcat", "Ġcar", "Ġcap", "ing", "Ġdog"]
    src = ["▁the", "▁cat", "▁cas", "▁dogs", "ings", "▁z"]
    out = vocab_map(src, tgt)
    assert out[0] == 0 and out[1] == 1            # exact matches after normalising "▁"/"Ġ"
    # "▁cas" is one edit from "▁cap", "▁car" and "▁cat": the lexicographically smallest wins
    assert tgt[out[2]] == "Ġcap"
    assert tgt[out[3]] == "Ġdog"                  # nearest
    assert tgt[out[4]] == "ing"
    # "▁z" is three edits from "▁cap", "▁car", "▁cat", "▁dog" and "ing": ties go to the lexicographically
    # smallest canonical string, "ing" ("i" < "▁")
    assert tgt[out[5]] == "ing"


def test_vocab_map_exact_match_beats_the_boundary_variant():
    assert vocab_map(["▁we", "we"], ["we", "Ġwe"]) == [1, 0]


def test_vocab_map_of_large_vocabularies_runs_vectorised():
    rng = np.random.default_rng(1)
    letters = list("abcdefghij")
    tgt = sorted({"".join(rng.choice(letters, rng.integers(1, 7))) for _ in range(4000)})
    src = ["".join(rng.choice(letters, rng.integers(1, 7))) for _ in range(3000)]
    out = vocab_map(src, tgt)
    from rapidfuzz.distance import Levenshtein
    for i in range(0, 3000, 97):
        d = [Levenshtein.distance(src[i], t) for t in tgt]
        best = min(d)
        assert out[i] == min(j for j in range(len(tgt)) if d[j] == best)   # tgt is sorted: smallest string


@pytest.fixture(scope="module")
def style_tokenizers():
    from fedlab.models.tokenizers import train_tokenizer

    lines = [SENTENCE, "we align the tokens of two tokenizers", "dynamic programming is an approach",
             "the tokens we utilize", "program the approach to align"] * 20
    return {style: train_tokenizer(lines, style, 300 if style.startswith("byte") else 60) for style in
            ("sentencepiece", "byte_bpe", "byte_bpe_digits", "wordpiece")}


def test_real_tokenizer_styles_align_the_words_they_split_alike(style_tokenizers):
    toks = {s: t.convert_ids_to_tokens(t(SENTENCE, add_special_tokens=False)["input_ids"])
            for s, t in style_tokenizers.items()}
    assert detect_convention(toks["sentencepiece"]) == "sentencepiece"
    for a in toks:
        for b in toks:
            pairs = align_sequences(toks[a], toks[b])
            ca, cb = canonical_tokens(toks[a]), canonical_tokens(toks[b])
            for i, j in pairs:
                assert ca[i].lstrip("▁") == cb[j].lstrip("▁")
            if a == b:   # a lone boundary marker ("▁", "Ġ") covers no character and is never matched
                assert pairs == [(i, i) for i in range(len(toks[a])) if ca[i].strip("▁ ")]
            else:
                assert len(pairs) >= 2


def test_cached_vocab_map_is_written_once_per_pair_and_direction(style_tokenizers, tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    sp, bb = style_tokenizers["sentencepiece"], style_tokenizers["byte_bpe"]
    m1 = cached_vocab_map(sp, bb)
    m2 = cached_vocab_map(bb, sp)
    assert len(list((tmp_path / "align").glob("*.npy"))) == 2
    assert m1.shape == (len(sp),) and m2.shape == (len(bb),)
    assert (cached_vocab_map(sp, bb) == m1).all()
    # every token that exists on both sides (after normalisation) maps to its twin
    ids_sp = sp(SENTENCE, add_special_tokens=False)["input_ids"]
    for i in ids_sp:
        s = canonical_tokens([sp.convert_ids_to_tokens(i)], "sentencepiece")[0]
        t = canonical_tokens([bb.convert_ids_to_tokens(int(m1[i]))], "byte_bpe")[0]
        if s in set(canonical_tokens(bb.convert_ids_to_tokens(list(range(len(bb)))), "byte_bpe")):
            assert s == t


def test_translate_topk_merges_duplicates_by_max_and_falls_back_to_one_hot():
    # teacher positions 0, 1; student positions 0, 1, 2 (position 2 has no next token)
    t_ids = torch.tensor([[5, 6, 7], [8, 9, 5]])
    t_logits = torch.tensor([[3.0, 2.0, 1.0], [4.0, 0.5, 0.0]])
    vmap = np.arange(10)
    vmap[6] = 5                        # teacher ids 5 and 6 collide in the student vocabulary
    nxt = torch.tensor([11, 12, -100])
    ids, probs, mask = translate_topk([(0, 0)], t_ids, t_logits, nxt, vmap, temperature=1.0)
    assert mask.tolist() == [True, True, False]
    # matched position 0: ids 5 (max of 3.0 and 2.0 → 3.0), 5 duplicate (prob 0), 7 (1.0)
    expected = torch.softmax(torch.tensor([3.0, 1.0]), 0)
    assert ids[0].tolist() == [5, 5, 7]
    assert torch.allclose(probs[0], torch.tensor([expected[0], 0.0, expected[1]]))
    # unmatched position 1: one-hot on the ground truth
    assert ids[1, 0] == 12 and probs[1].tolist() == [1.0, 0.0, 0.0]
    assert probs[2].sum() == 0
    ids_t, probs_t, _ = translate_topk([(0, 0)], t_ids, t_logits, nxt, vmap, temperature=2.0)
    assert torch.allclose(probs_t[0, [0, 2]], torch.softmax(torch.tensor([1.5, 0.5]), 0))


def test_paper_sentence_logit_positions_pair_by_the_token_they_predict():
    """LLaMA position i (predicting token i + 1) takes BLOOM position j only when tokens i + 1 and
    j + 1 cover the same characters: '▁we' (predicting 'util') has no partner, '▁dynamic' (predicting
    '▁program') none either; '▁the' pairs with 'Ġthe' because both predict 'dynamic'."""
    from fedlab.align import next_token_pairs

    pairs = next_token_pairs(align_sequences(LLAMA, BLOOM), (len(LLAMA) + 1, len(BLOOM) + 1))
    got = [(LLAMA[i], BLOOM[j]) for i, j in pairs if i < len(LLAMA) and j < len(BLOOM)]
    assert got == [("ize", "Ġutilize"), ("▁the", "Ġthe"), ("ming", "Ġprogramming"), ("▁approach", "Ġapproach"),
                   ("▁to", "Ġto"), ("▁align", "Ġalign"), ("▁tokens", "Ġtokens")]
    # the token-level pairs would have paired '▁we' with 'we', whose logits predict different tokens
    assert (0, 0) in align_sequences(LLAMA, BLOOM) and (0, 0) not in pairs
