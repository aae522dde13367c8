"""Tokenizers that fedlab trains for its zoo, each in the style of a real model family so that
cross-tokenizer alignment meets real differences in vocabulary and word-boundary convention:

- ``sentencepiece``: BPE with the SentencePiece word-start marker "▁" (LLaMA style)
- ``byte_bpe``: byte-level BPE with the "Ġ" space marker (GPT-2, OPT, Bloom style)
- ``byte_bpe_digits``: byte-level BPE that splits digits one by one (Qwen2 style)
- ``wordpiece``: WordPiece with "##" continuations (BERT style)
"""
from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

STYLES = ("sentencepiece", "byte_bpe", "byte_bpe_digits", "wordpiece")


def train_tokenizer(lines: list[str], style: str, vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a tokenizer of `style` with about `vocab_size` entries on `lines`."""
    if style == "sentencepiece":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        specials = ["<unk>", "<s>", "</s>", "<pad>"]
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
        tok.train_from_iterator(lines, trainer)
        return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                       eos_token="</s>", pad_token="<pad>")
    if style in ("byte_bpe", "byte_bpe_digits"):
        tok = Tokenizer(models.BPE())
        byte = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte])
                             if style == "byte_bpe_digits" else byte)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        specials = ["<|endoftext|>", "<pad>"]
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(lines, trainer)
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                       eos_token="<|endoftext|>", unk_token="<|endoftext|>", pad_token="<pad>")
    if style == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
        tok.train_from_iterator(lines, trainer)
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                       cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    raise ValueError(f"tokenizer style {style!r} is not allowed; allowed: {', '.join(STYLES)}")
