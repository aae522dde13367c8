"""Cross-tokenizer alignment for logit-level knowledge transfer (fedlab/methods/fedmkt/README.md (FM-4) –
(FM-6))."""
from fedlab.align.logits import translate_topk
from fedlab.align.normalize import canonical, canonical_tokens, detect_convention
from fedlab.align.sequence import align_sequences, next_token_pairs
from fedlab.align.vocab import cached_vocab_map, vocab_map, vocab_tokens

__all__ = ["align_sequences", "cached_vocab_map", "canonical", "canonical_tokens", "detect_convention",
           "next_token_pairs", "translate_topk", "vocab_map", "vocab_tokens"]
