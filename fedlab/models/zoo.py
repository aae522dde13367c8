"""The model zoo: tiny causal LMs built from Hugging Face configs, each with its own tokenizer trained by
fedlab, pretrained on the embedded corpus and cached on disk; plus loading of any Hugging
Face model id or local directory through the same `load_model` interface."""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import (
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BloomConfig,
    GPT2Config,
    LlamaConfig,
    OPTConfig,
    PreTrainedTokenizerBase,
    Qwen2Config,
)

from fedlab import interrupt
from fedlab.home import fedlab_home
from fedlab.models.digest import weights_sha256  # noqa: F401  (re-exported: zoo.weights_sha256)
from fedlab.models.tokenizers import train_tokenizer
from fedlab.quiet import quiet_libraries


@dataclass(frozen=True)
class ZooSpec:
    name: str
    family: str                 # llama | gpt2 | opt | bloom | qwen2 | bert (an encoder, pretrained by MLM)
    tokenizer_style: str
    vocab_size: int
    make_config: Callable[[int, int, int], object]   # (vocab, pad_id, eos_id) -> transformers config
    steps: int                  # pretraining optimiser steps
    lr: float = 3e-3
    batch_size: int = 32
    seq_len: int = 64
    role: str = "slm"           # "llm" | "slm"
    about: str = ""


def _llama(d, layers, heads, ffn, kv=None):
    return lambda v, pad, eos: LlamaConfig(vocab_size=v, hidden_size=d, intermediate_size=ffn,
                                           num_hidden_layers=layers, num_attention_heads=heads,
                                           num_key_value_heads=kv or heads, max_position_embeddings=256,
                                           pad_token_id=pad, eos_token_id=eos, bos_token_id=eos,
                                           tie_word_embeddings=True)


def _gpt2(d, layers, heads):
    return lambda v, pad, eos: GPT2Config(vocab_size=v, n_embd=d, n_layer=layers, n_head=heads, n_positions=256,
                                          pad_token_id=pad, eos_token_id=eos, bos_token_id=eos,
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def _opt(d, layers, heads, ffn):
    return lambda v, pad, eos: OPTConfig(vocab_size=v, hidden_size=d, num_hidden_layers=layers, ffn_dim=ffn,
                                         num_attention_heads=heads, word_embed_proj_dim=d,
                                         max_position_embeddings=256, pad_token_id=pad, eos_token_id=eos,
                                         bos_token_id=eos, dropout=0.0, attention_dropout=0.0)


def _bloom(d, layers, heads):
    return lambda v, pad, eos: BloomConfig(vocab_size=v, hidden_size=d, n_layer=layers, n_head=heads,
                                           pad_token_id=pad, eos_token_id=eos, bos_token_id=eos,
                                           hidden_dropout=0.0, attention_dropout=0.0)


def _qwen2(d, layers, heads, ffn, kv):
    return lambda v, pad, eos: Qwen2Config(vocab_size=v, hidden_size=d, intermediate_size=ffn,
                                           num_hidden_layers=layers, num_attention_heads=heads,
                                           num_key_value_heads=kv, max_position_embeddings=256,
                                           pad_token_id=pad, eos_token_id=eos, bos_token_id=eos,
                                           tie_word_embeddings=True)


def _bert(d, layers, heads, ffn):
    return lambda v, pad, eos: BertConfig(vocab_size=v, hidden_size=d, num_hidden_layers=layers,
                                          num_attention_heads=heads, intermediate_size=ffn,
                                          max_position_embeddings=256, pad_token_id=pad,
                                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


ENCODER_FAMILIES = ("bert",)

ZOO: dict[str, ZooSpec] = {s.name: s for s in [
    ZooSpec("tiny-llama", "llama", "sentencepiece", 1000, _llama(192, 6, 6, 512), steps=1100, lr=3e-3, role="llm",
            about="the embedded 'LLM': LLaMA, 6 blocks, d=192, SentencePiece-style BPE"),
    # a deeper LLM of about tiny-llama's size, for the compression geometry of the paper's 32-block LLaMA (at 6
    # blocks the Offsite-Tuning model keeps 5 and κ = 0.3 and 0.5 give the same OT model; at 12 they differ)
    ZooSpec("tiny-llama-deep", "llama", "sentencepiece", 1000, _llama(128, 12, 4, 352), steps=1100, lr=2e-3,
            role="llm", about="a deeper embedded LLM: LLaMA, 12 blocks, d=128, tiny-llama's tokenizer"),
    ZooSpec("tiny-llama-s", "llama", "sentencepiece", 1000, _llama(96, 4, 4, 256), steps=500,
            about="a small LLaMA (4 blocks, d=96) with tiny-llama's tokenizer: the same-tokenizer SLM"),
    ZooSpec("tiny-gpt2", "gpt2", "byte_bpe", 800, _gpt2(96, 4, 4), steps=500,
            about="GPT-2, 4 blocks, d=96, byte-level BPE"),
    ZooSpec("tiny-opt", "opt", "byte_bpe", 1200, _opt(96, 4, 4, 256), steps=500,
            about="OPT, 4 blocks, d=96, byte-level BPE (larger vocabulary)"),
    ZooSpec("tiny-bloom", "bloom", "byte_bpe", 1500, _bloom(96, 4, 4), steps=500,
            about="Bloom, 4 blocks, d=96, byte-level BPE, ALiBi positions"),
    ZooSpec("tiny-qwen2", "qwen2", "byte_bpe_digits", 1100, _qwen2(96, 4, 4, 256, 2), steps=500,
            about="Qwen2, 4 blocks, d=96, grouped-query attention, digit-split byte-level BPE"),
    # lr 1e-3: at 3e-3 the post-LN encoder collapsed to the unigram predictor (final MLM loss 4.38, the same
    # hidden states for every input); at 1e-3 it ends at 3.48 with input-dependent states
    ZooSpec("tiny-bert", "bert", "wordpiece", 1000, _bert(128, 6, 4, 256), steps=600, lr=1e-3, role="encoder",
            about="BERT encoder, 6 blocks, d=128, WordPiece, masked-LM pretraining (ELSA's embedded model)"),
    # pico models: the same families at test scale (seconds to build)
    ZooSpec("pico-llama", "llama", "sentencepiece", 600, _llama(32, 4, 2, 64), steps=40, role="llm",
            batch_size=16, about="test-scale LLaMA"),
    ZooSpec("pico-llama-s", "llama", "sentencepiece", 600, _llama(16, 2, 2, 32), steps=30, batch_size=16,
            about="test-scale LLaMA sharing pico-llama's tokenizer"),
    ZooSpec("pico-gpt2", "gpt2", "byte_bpe", 500, _gpt2(32, 2, 2), steps=30, batch_size=16,
            about="test-scale GPT-2"),
    ZooSpec("pico-opt", "opt", "byte_bpe", 700, _opt(32, 2, 2, 64), steps=30, batch_size=16,
            about="test-scale OPT"),
    ZooSpec("pico-bloom", "bloom", "byte_bpe", 800, _bloom(32, 2, 2), steps=30, batch_size=16,
            about="test-scale Bloom"),
    ZooSpec("pico-qwen2", "qwen2", "byte_bpe_digits", 650, _qwen2(32, 2, 2, 64, 1), steps=30, batch_size=16,
            about="test-scale Qwen2"),
    ZooSpec("pico-bert", "bert", "wordpiece", 500, _bert(32, 3, 2, 64), steps=30, batch_size=16, role="encoder",
            about="test-scale BERT encoder (3 blocks: ELSA's 1/1/1 split)"),
]}

TINY_ZOO = [n for n in ZOO if n.startswith("tiny-")]


# bump when the build procedure changes in a way the recipe below does not capture
# (3: the build runs on one torch thread, whatever the caller's: GPT-2's and OPT's weights depended on it)
ZOO_VERSION = 3


def zoo_dir(name: str) -> Path:
    return fedlab_home() / "zoo" / name


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def recipe(name: str, world_seed: int = 0) -> dict:
    """Everything a zoo model is built from: architecture, tokenizer, world, corpus, optimisation, seeds,
    fedlab's zoo version and the library versions that train it. Its hash keys the cache."""
    import tokenizers
    import transformers

    spec = ZOO[name]
    arch = spec.make_config(spec.vocab_size, 0, 1).to_dict()
    arch = {k: v for k, v in arch.items() if k not in ("transformers_version", "_name_or_path")}
    corpus, tokenizer_text = _text_digests(world_seed)
    extra = {"objective": "masked_lm", "mask_rate": MASK_RATE} if spec.family in ENCODER_FAMILIES else {}
    return {**extra, "name": name, "zoo_version": ZOO_VERSION, "family": spec.family, "architecture": arch,
            "tokenizer_style": spec.tokenizer_style, "vocab_size": spec.vocab_size, "steps": spec.steps,
            "lr": spec.lr, "batch_size": spec.batch_size, "seq_len": spec.seq_len, "world_seed": world_seed,
            "corpus_sha256": corpus, "tokenizer_text_sha256": tokenizer_text,
            "libraries": {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
                          "tokenizers": tokenizers.__version__}}


@lru_cache(maxsize=4)
def _text_digests(world_seed: int) -> tuple[str, str]:
    from fedlab.data.corpus import corpus_lines

    return _sha256("\n".join(corpus_lines(world_seed))), _sha256("\n".join(_tokenizer_lines(world_seed)))


@lru_cache(maxsize=64)
def fingerprint(name: str, world_seed: int = 0) -> str:
    return _sha256(json.dumps(recipe(name, world_seed), sort_keys=True, default=str))[:16]


def shipped_current(name: str, world_seed: int = 0) -> bool:
    """Whether the repository ships weights of `name` built by the current recipe (the world of seed 0)."""
    from fedlab.models import shipped

    e = shipped.entry(name) if world_seed == 0 else None
    return bool(e) and e.get("fingerprint") == fingerprint(name, world_seed)


def cache_meta(name: str) -> dict:
    """meta.json of the copy built on this machine under $FEDLAB_HOME ({} when none, and when the copy is
    damaged: its meta.json unreadable, or a file whose size or sha256 differs from what meta.json recorded at
    the build — the cache is then rebuilt, with a line saying why)."""
    path = zoo_dir(name) / "meta.json"
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return _damaged(name, f"{path} cannot be read ({type(e).__name__})")
    from fedlab.models import shipped

    bad = shipped.file_problems(zoo_dir(name), meta.get("files") or {}, "the build's record")
    return _damaged(name, bad[0]) if bad else meta


_SAID: set[str] = set()


def _damaged(name: str, why: str) -> dict:
    import sys

    if why in _SAID:
        return {}
    _SAID.add(why)
    print(f"[fedlab] zoo: the copy of {name} built under FEDLAB_HOME is damaged ({why}); it is a cache: "
          f"rebuilding it (`fedlab zoo build {name} --rebuild`)", file=sys.stderr, flush=True)
    return {}


def read_meta(name: str) -> dict:
    """meta.json of the weights `resolve(name)` loads: the shipped ones when they match the recipe, else the
    copy built on this machine ({} when neither)."""
    if name in ZOO and shipped_current(name):
        from fedlab.models import shipped

        return json.loads((shipped.SHIPPED / name / "meta.json").read_text())
    return cache_meta(name)


def is_cached(name: str, world_seed: int = 0) -> bool:
    """Built on this machine by the current recipe: a cached model whose fingerprint differs is stale, never
    reused."""
    meta = cache_meta(name)
    return bool(meta) and meta.get("fingerprint") == fingerprint(name, world_seed)


def is_built(name: str, world_seed: int = 0) -> bool:
    """Available without pretraining: shipped by the current recipe, or built on this machine by it."""
    return shipped_current(name, world_seed) or is_cached(name, world_seed)


def _tokenizer_lines(world_seed: int) -> list[str]:
    from fedlab.data.corpus import corpus_lines
    from fedlab.data.tasks import TASKS, privacy_examples, public_examples, task_examples

    lines = list(corpus_lines(world_seed))
    for t in TASKS:
        for split in ("train", "test"):
            lines += [f"{e.prompt} {' '.join(e.choices or (e.target,))}" for e in task_examples(t, split, 40, world_seed)]
    lines += [f"{e.prompt} {e.target}" for e in public_examples(100, world_seed)]
    lines += [e.prompt for e in privacy_examples(100, world_seed)]
    return lines


MASK_RATE = 0.15


def mask_tokens(ids: torch.Tensor, tokenizer, generator: torch.Generator, rate: float = MASK_RATE):
    """BERT's masked-LM corruption: `rate` of the non-special positions become targets; of those 80 % turn into
    [MASK], 10 % into a random token, 10 % stay. Returns (inputs, labels with −100 off the targets)."""
    special = torch.tensor(tokenizer.all_special_ids)
    pick = (torch.rand(ids.shape, generator=generator) < rate) & ~torch.isin(ids, special)
    labels = torch.where(pick, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=generator)
    inputs = torch.where(pick & (roll < 0.8), torch.full_like(ids, tokenizer.mask_token_id), ids)
    rand = torch.randint(len(tokenizer), ids.shape, generator=generator)
    inputs = torch.where(pick & (roll >= 0.8) & (roll < 0.9), rand, inputs)
    return inputs, labels


class LinePacker:
    """Rows of `seq_len` tokens made of randomly drawn corpus lines (each followed by EOS), drawn anew
    every step: a fixed packing lets a tiny model memorise the chunks instead of the facts."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, lines: list[str], seq_len: int, seed: int):
        eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
        self.lines = [ids + [eos] for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]]
        self.seq_len = seq_len
        self.rng = random.Random(seed)

    def batch(self, batch_size: int) -> torch.Tensor:
        rows = []
        for _ in range(batch_size):
            row: list[int] = []
            while len(row) < self.seq_len:
                row += self.rng.choice(self.lines)
            rows.append(row[: self.seq_len])
        return torch.tensor(rows)


def build(name: str, world_seed: int = 0, force: bool = False, progress: bool = True) -> Path:
    """The folder of zoo model `name`: the shipped weights when they match the current recipe (checked against
    the manifest), else the copy built on this machine, pretraining it first when there is none. `force`
    pretrains from the recipe into $FEDLAB_HOME whatever is shipped or cached (`fedlab zoo build --rebuild`).
    A file lock makes concurrent callers (sweep trials, Ray workers) wait for one build instead of racing."""
    import fcntl

    if name not in ZOO:
        raise KeyError(f"zoo model {name!r} is not known; allowed: {', '.join(ZOO)}")
    if not force and shipped_current(name, world_seed):
        from fedlab.models import shipped

        return shipped.verified_dir(name)
    out = zoo_dir(name)
    if is_cached(name, world_seed) and not force:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if is_cached(name, world_seed) and not force:
                return out
            old = cache_meta(name)
            if old and progress and not force:
                import sys

                print(f"[fedlab] zoo: {name} in the cache was built by another recipe (fingerprint "
                      f"{old.get('fingerprint', 'none')}, now {fingerprint(name, world_seed)}): rebuilding",
                      file=sys.stderr, flush=True)
            return _build_locked(name, world_seed, progress, out)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_locked(name: str, world_seed: int, progress: bool, out: Path) -> Path:
    spec = ZOO[name]
    quiet_libraries()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # the weights must not depend on the caller's thread count
    try:
        return _pretrain(name, spec, world_seed, progress, out)
    finally:
        torch.set_num_threads(threads)


def _pretrain(name: str, spec: ZooSpec, world_seed: int, progress: bool, out: Path) -> Path:
    import sys

    from fedlab.data.corpus import corpus_lines
    from fedlab.seeding import derive_seed

    torch.manual_seed(derive_seed("zoo", name, world_seed))
    tok = train_tokenizer(_tokenizer_lines(world_seed), spec.tokenizer_style, spec.vocab_size)
    cfg = spec.make_config(len(tok), tok.pad_token_id, tok.eos_token_id)
    encoder = spec.family in ENCODER_FAMILIES
    model = (AutoModelForMaskedLM if encoder else AutoModelForCausalLM).from_config(cfg)
    masking = torch.Generator().manual_seed(derive_seed("zoo-masks", name, world_seed))
    packer = LinePacker(tok, corpus_lines(world_seed), spec.seq_len, derive_seed("zoo-batches", name, world_seed))
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(s, spec.steps) / spec.steps)))
    model.train()
    t0 = time.time()
    if progress:
        print(f"[fedlab] zoo: building {name} ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
              f"{spec.steps} pretraining steps) → {out}", file=sys.stderr, flush=True)
    bar = tqdm(range(spec.steps), desc=f"pretrain {name}", disable=not progress or None, leave=False)
    # without a terminal the bar is off: a line every tenth of the steps, with an estimate of what is left
    lines_every = max(1, spec.steps // 10) if progress and bar.disable else 0
    loss_v = float("nan")
    for step in bar:
        interrupt.check(f"while building zoo model {name} (step {step} of {spec.steps}; nothing was kept)")
        batch = packer.batch(spec.batch_size)
        if encoder:        # [CLS] first, then masked-LM targets on 15 % of the tokens
            batch = torch.cat([torch.full((len(batch), 1), tok.cls_token_id), batch[:, :-1]], dim=1)
            inputs, labels = mask_tokens(batch, tok, masking)
            loss = model(input_ids=inputs, labels=labels).loss
        else:
            loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        loss_v = loss.item()
        bar.set_postfix(loss=f"{loss_v:.3f}")
        if lines_every and (step + 1) % lines_every == 0 and step + 1 < spec.steps:
            spent = time.time() - t0
            print(f"[fedlab] zoo: {name} step {step + 1}/{spec.steps}  loss {loss_v:.3f}  "
                  f"about {spent / (step + 1) * (spec.steps - step - 1):.0f}s left", file=sys.stderr, flush=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.eval()
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    meta = dict(name=name, family=spec.family, tokenizer_style=spec.tokenizer_style, vocab=len(tok),
                params=sum(p.numel() for p in model.parameters()), steps=spec.steps, final_loss=loss_v,
                seconds=round(time.time() - t0, 1), world_seed=world_seed, role=spec.role,
                fingerprint=fingerprint(name, world_seed), weights_sha256=weights_sha256(model.state_dict()),
                built_on=_built_on(), recipe=recipe(name, world_seed))
    from fedlab.models import shipped

    meta["files"] = {f.name: {"bytes": f.stat().st_size, "sha256": shipped.file_sha256(f)}
                     for f in sorted(tmp.iterdir()) if f.is_file()}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    if progress:
        print(f"[fedlab] zoo: {name} built in {meta['seconds']:.0f}s (final loss {loss_v:.3f})", file=sys.stderr,
              flush=True)
    return out


def _built_on() -> dict:
    """Where a build ran: the CPU, the instruction set in force and the numerics mode (the weights' bits
    depend on them; the build runs on one thread)."""
    from fedlab import numerics

    env = numerics.environment(threads=1)
    return {k: env[k] for k in ("cpu", "capability", "numerics", "threads")}


def describe_zoo() -> list[dict]:
    rows = []
    for name, spec in ZOO.items():
        meta = read_meta(name)
        built = "shipped" if shipped_current(name) else "yes" if is_cached(name) else ("stale" if meta else "no")
        rows.append(dict(name=name, family=spec.family, role=spec.role, tokenizer=spec.tokenizer_style,
                         built=built, params=meta.get("params"), loss=meta.get("final_loss"),
                         seconds=meta.get("seconds"), fingerprint=fingerprint(name),
                         weights=(meta.get("weights_sha256") or "")[:12] or None, about=spec.about))
    return rows


def provenance(name: str) -> dict:
    """What identifies the weights a run used: for a zoo model its recipe fingerprint and weights' sha256;
    for a converted real model its weights' sha256; for anything else the name it was loaded by."""
    from fedlab.models import derived, real

    if name in ZOO:
        meta = read_meta(name)
        return {"fingerprint": meta.get("fingerprint"), "weights_sha256": meta.get("weights_sha256")}
    if derived.is_derived(name):
        meta = derived.read_derived_meta(name)
        return {"fingerprint": name[len(derived.PREFIX):], "weights_sha256": meta.get("weights_sha256")}
    if name in real.REAL_MODELS:
        return {"weights_sha256": real.weights_digest(name)}
    return {"source": name}


def resolve(name: str) -> str:
    """Where `name` loads from: a zoo folder (building it when missing), a derived model's folder, a local
    folder, or a Hub id."""
    from fedlab.models import derived, real

    if name in ZOO:
        return str(build(name))
    if derived.is_derived(name):
        return str(derived.derived_path(name))
    if name in real.REAL_MODELS:
        return str(real.ensure(name))
    if os.path.isdir(name):
        return name
    from fedlab.models.inspect import looks_local

    if looks_local(name):
        raise FileNotFoundError(f"model.name: {name!r} is neither a zoo model nor an existing folder")
    return name  # a Hugging Face Hub id (needs network or a filled HF cache)


def load_tokenizer(name: str):
    """The tokenizer of a zoo name, local folder or Hub id (pad token set), without loading weights."""
    quiet_libraries()
    tok = AutoTokenizer.from_pretrained(resolve(name))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(name: str, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32):
    """(model, tokenizer) for a zoo name, a local Hugging Face folder or a Hub id."""
    quiet_libraries()
    if name in ZOO and ZOO[name].family in ENCODER_FAMILIES:
        raise ValueError(f"model.name: {name!r} is an encoder ({ZOO[name].family}); it has no causal LM head "
                         "(load it with fedlab.models.zoo.load_encoder, or use it with an encoder method)")
    path = resolve(name)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    model.eval()
    return model, tok


def is_encoder(name: str) -> bool:
    """Whether `name` is an encoder (BERT family: a zoo encoder, `minilm-l6`, or a folder/Hub id whose config
    says so), i.e. loaded with `load_encoder`, not `load_model`."""
    if name in ZOO:
        return ZOO[name].family in ENCODER_FAMILIES
    from fedlab.models import real

    if name in real.REAL_MODELS:
        return name == "minilm-l6"
    from transformers import AutoConfig

    try:
        return getattr(AutoConfig.from_pretrained(resolve(name)), "model_type", "") in ENCODER_FAMILIES
    except (OSError, ValueError):
        return False


def load_encoder(name: str, device: str | torch.device = "cpu"):
    """(encoder, tokenizer) for a sentence/encoder model (e.g. `minilm-l6`, any BERT folder or Hub id). Weights a
    checkpoint lacks (a masked-LM checkpoint has no pooler) are initialised from a fixed seed, so every load of
    the same name gives the same model."""
    from transformers import AutoModel

    quiet_libraries()
    path = resolve(name)
    tok = AutoTokenizer.from_pretrained(path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModel.from_pretrained(path).to(device)
    model.eval()
    return model, tok


@torch.no_grad()
def static_embeddings(model, tokenizer, texts: list[str]) -> torch.Tensor:
    """L2-normalised mean of the encoder's input word embeddings over each text's tokens (no special tokens, no
    transformer layer): a context-free sentence embedding at the cost of a tokenisation and a table lookup."""
    table = model.get_input_embeddings().weight
    rows = []
    for t in texts:
        ids = tokenizer(t, add_special_tokens=False)["input_ids"] or [tokenizer.unk_token_id or 0]
        rows.append(torch.nn.functional.normalize(table[ids].float().mean(0), dim=0).cpu())
    return torch.stack(rows) if rows else torch.zeros(0)


@torch.no_grad()
def sentence_embeddings(model, tokenizer, texts: list[str], batch_size: int = 64) -> torch.Tensor:
    """Mean-pooled, L2-normalised sentence embeddings (the all-MiniLM-L6-v2 recipe)."""
    out = []
    device = next(model.parameters()).device
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i:i + batch_size], padding=True, truncation=True, max_length=128,
                        return_tensors="pt").to(device)
        hidden = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        out.append(torch.nn.functional.normalize(emb, dim=-1).cpu())
    return torch.cat(out) if out else torch.zeros(0)
