"""ELSA's models (paper 002 §3.2): a BERT-family encoder with a classification head on its pooled
vector (the mean of the last layer's token vectors by default, or [CLS]), cut into three parts at `cuts` = (p, p + q) — the client holds embeddings, blocks [0, p), blocks
[p + q, M) and the head; the edge holds blocks [p, p + q). Three model transforms build each party's view
of the same architecture, so LoRA keys of a block are named alike everywhere and the parts' states join into
the whole model's state:

- `encoder_classifier(num_labels, pooling)`: the encoder with a linear head on the pooled vector (seeded
  init); declares the group `head`;
- `remote_middle(cuts)`: the client's view — block p becomes a `RemoteMiddle` that sends the hidden states
  through the client's link to its edge and returns what comes back (an autograd function: the backward pass
  sends the gradient to the edge and returns the edge's), blocks (p, p + q) become pass-throughs; LoRA goes
  on the client's blocks only;
- the edge's view is the generic `split(cuts, "middle")` transform (`fedlab.transforms.split`);
- `encoder_lora(head)`: LoRA on the attention of the blocks the chain declared, plus the head trainable and
  communicated when `head` (ends the chain)."""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from fedlab.transforms.lora import AdapterSpec, apply_lora
from fedlab.transforms.registry import register_transform
from fedlab.transforms.split import PassThrough, _blocks, part_range

POOLINGS = ("mean", "cls")


def pool(hidden: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """The sequence's vector: h_[CLS] = hidden[:, 0] (`cls`), or the mean over the attended positions,
    Σ_t m_t h_t / Σ_t m_t (`mean`)."""
    if how == "cls":
        return hidden[:, 0]
    if mask is None:
        return hidden.mean(1)
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


class EncoderClassifier(nn.Module):
    """logits = W·pool(H) + b over the encoder's last hidden states H (the pooler, if any, is not used).

    Mean pooling is the default: a masked-LM-pretrained encoder (the zoo's tiny-bert) never trains its [CLS]
    vector, so a head on [CLS] starts from a vector that carries little of the sentence."""

    def __init__(self, encoder: nn.Module, num_labels: int, seed: int, pooling: str = "mean"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"encoder_classifier: pooling {pooling!r}; allowed: {list(POOLINGS)}")
        self.bert = encoder              # the name lets the split transforms find bert.encoder.layer
        self.config = encoder.config
        self.pooling = pooling
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.classifier = nn.Linear(encoder.config.hidden_size, int(num_labels))
        self.link = None                 # the client's link to its edge (remote_middle models only)
        self.mask = None                 # the 2-D attention mask of the forward in progress

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        device = self.classifier.weight.device        # inputs follow the model (a GPU run's batches come from the CPU)
        input_ids = input_ids.to(device) if input_ids is not None else None
        attention_mask = attention_mask.to(device) if attention_mask is not None else None
        self.mask = attention_mask
        try:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        finally:
            self.mask = None
        pooled = pool(hidden, attention_mask, self.pooling)
        return SimpleNamespace(logits=self.classifier(pooled), pooled=pooled)


@register_transform("encoder_classifier", params=("num_labels", "pooling"))
def encoder_classifier(model, build, num_labels, pooling="mean"):
    """The encoder with a linear classification head on its pooled vector (`num_labels` outputs, seeded)."""
    out = EncoderClassifier(model, num_labels, build.seed, pooling)
    build.groups["head"] = list(out.classifier.parameters())
    return out


class _EdgeCall(torch.autograd.Function):
    """Ĥ₂ = link.forward(H) in the forward pass; ∂L/∂H = link.backward(∂L/∂Ĥ₂) in the backward pass (the
    sketch is the identity there: straight-through; the rotation's exact transpose is the link's part)."""

    @staticmethod
    def forward(ctx, hidden, link):
        ctx.link = link
        return link.forward(hidden, train=True)

    @staticmethod
    def backward(ctx, grad):
        return ctx.link.backward(grad), None


class RemoteMiddle(nn.Module):
    """Stands in for the edge's blocks on the client: sends the hidden states over `root.link`."""

    def __init__(self, root: EncoderClassifier, as_tuple: bool = False):
        super().__init__()
        self._root = [root]              # a plain list: the root is not registered as a submodule
        self.as_tuple = as_tuple

    def forward(self, hidden_states, *args, **kwargs):
        root = self._root[0]
        if root.link is None:
            raise RuntimeError("remote_middle: the model has no link to an edge (set model.link before a forward)")
        root.link.mask = root.mask
        if torch.is_grad_enabled() and hidden_states.requires_grad:
            out = _EdgeCall.apply(hidden_states, root.link)
        else:
            out = root.link.forward(hidden_states, train=False)
        return (out, None) if self.as_tuple else out


@register_transform("remote_middle", params=("cuts",))
def remote_middle(model, build, cuts):
    """The client's view of the split at `cuts` = (p, p + q): blocks [p, p + q) run on the edge (module
    docstring); LoRA goes on blocks [0, p) and [p + q, M)."""
    if not isinstance(model, EncoderClassifier):
        raise ValueError("model transform 'remote_middle' applies to an encoder_classifier model")
    blocks = _blocks(model)
    start, stop = part_range(cuts, "middle", len(blocks))
    blocks[start] = RemoteMiddle(model)
    for i in range(start + 1, stop):
        blocks[i] = PassThrough(False)
    build.lora_layers = tuple(i for i in range(len(blocks)) if not start <= i < stop)
    return model


@register_transform("encoder_lora", params=("head",), ends_chain=True)
def encoder_lora(model, build, head=True):
    """LoRA (the config's `model.lora`) on the attention of the declared blocks; with `head` the classification
    head is trainable and communicated too. Ends the chain."""
    lc = build.lora
    pm, spec = apply_lora(model, lc.r, lc.alpha, lc.dropout, lc.target_modules, seed=build.seed,
                          layers=build.lora_layers, task_type=None)
    names = {id(p): n for n, p in pm.named_parameters()}
    extra = []
    if head and "head" in build.groups:
        for p in build.groups["head"]:
            p.requires_grad_(True)
            extra.append(names[id(p)])
    order = {n: i for i, n in enumerate(names.values())}
    keys = tuple(sorted([*spec.trainable, *extra], key=order.__getitem__))
    build.spec = AdapterSpec(trainable=keys, communicated=keys)
    return pm


def root_of(model) -> EncoderClassifier:
    """The EncoderClassifier under any PEFT wrapper."""
    for m in model.modules():
        if isinstance(m, EncoderClassifier):
            return m
    raise ValueError("not an encoder_classifier model")
