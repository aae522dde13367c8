"""Split learning (ELSA, paper 002): a model's blocks cut into parts held by different parties — with
cuts (c1, c2), blocks [0, c1) are the `front` (the client: embeddings and first blocks), [c1, c2) the
`middle` (the edge), [c2, L) the `back` (the client again: last blocks and the head).

The `split` transform keeps the whole model's structure but replaces every block outside the part by a
parameter-free pass-through, so one forward of the wrapped model is the part's computation:

- activations leave the part at its last block (a forward hook stores them);
- activations enter the part at its first block (a forward pre-hook replaces that block's input with the
  received tensor); the party that does not hold the text runs the model on placeholder token ids of the
  same shape, which only fix positions and masks (`run_part`).

Every architecture whose blocks take the hidden states as their first argument works (LLaMA, GPT-2, OPT,
Bloom, Qwen2, BERT); the part's blocks are declared as the parameter group `part`."""
from __future__ import annotations

import torch
from torch import nn

from fedlab.transforms.compress import decoder_blocks
from fedlab.transforms.registry import register_transform

PARTS = ("front", "middle", "back")
TUPLE_BLOCKS = ("bloom",)   # model types whose blocks return (hidden_states, attentions)


class PassThrough(nn.Module):
    """Stands in for a block another party holds: returns its input hidden states unchanged."""

    def __init__(self, as_tuple: bool):
        super().__init__()
        self.as_tuple = as_tuple

    def forward(self, hidden_states, *args, **kwargs):
        return (hidden_states, None) if self.as_tuple else hidden_states


def part_range(cuts, part: str, num_blocks: int) -> tuple[int, int]:
    c1, c2 = cuts
    if not 0 < c1 < c2 < num_blocks:
        raise ValueError(f"model transform 'split': cuts={tuple(cuts)!r} are not allowed; expected 0 < c1 < c2 < "
                         f"{num_blocks} (every part keeps at least one of the {num_blocks} blocks)")
    if part not in PARTS:
        raise ValueError(f"model transform 'split': part={part!r} is not allowed; allowed: {', '.join(PARTS)}")
    return {"front": (0, c1), "middle": (c1, c2), "back": (c2, num_blocks)}[part]


def _blocks(model):
    base = getattr(model, "base_model", model)
    for path in ("encoder.layer", "bert.encoder.layer", "model.encoder.layer"):
        obj = base
        for name in path.split("."):
            obj = getattr(obj, name, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList):
            return obj
    return decoder_blocks(model)


@register_transform("split", params=("cuts", "part"))
def split_transform(model, build, cuts, part):
    """The model as the `part` (front | middle | back) of a split at `cuts` = (c1, c2): blocks outside it
    become pass-throughs; the part's blocks are the group `part`; LoRA (added after) goes on them only."""
    blocks = _blocks(model)
    start, stop = part_range(cuts, part, len(blocks))
    as_tuple = getattr(model.config, "model_type", "") in TUPLE_BLOCKS
    for i in range(len(blocks)):
        if not start <= i < stop:
            blocks[i] = PassThrough(as_tuple)
    model.fedlab_split = {"part": part, "start": start, "stop": stop}
    model.fedlab_split_input = None

    def enter(module, args, kwargs):
        received = model.fedlab_split_input
        if received is None:
            return None
        if args:
            return (received, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": received}

    def leave(module, args, kwargs, output):
        model.fedlab_split_output = output[0] if isinstance(output, tuple) else output

    if part != "front":
        blocks[start].register_forward_pre_hook(enter, with_kwargs=True)
    if part != "back":
        blocks[stop - 1].register_forward_hook(leave, with_kwargs=True)
    build.groups["part"] = [p for i in range(start, stop) for p in blocks[i].parameters()]
    build.lora_layers = tuple(range(start, stop))
    return model


def _root(model):
    """The module the `split` transform annotated (under any PEFT wrapper)."""
    for m in model.modules():   # the annotated module itself (a PEFT wrapper forwards attribute reads to it)
        if "fedlab_split" in m.__dict__:
            return m
    raise ValueError("model was not built with the 'split' transform")


def run_part(model, attention_mask: torch.Tensor, input_ids: torch.Tensor | None = None,
             hidden: torch.Tensor | None = None):
    """One forward of a split part: `front` takes the token ids and returns the activations it sends;
    `middle` takes received activations and returns the ones it sends; `back` takes received activations
    and returns the model's output (logits). Parts without the text run on placeholder ids."""
    root = _root(model)
    part = root.fedlab_split["part"]
    if part == "front":
        if input_ids is None:
            raise ValueError("the front part needs input_ids")
        ids = input_ids
    else:
        if hidden is None:
            raise ValueError(f"the {part} part needs the received activations (hidden)")
        ids = torch.zeros(attention_mask.shape, dtype=torch.long, device=attention_mask.device)
    root.fedlab_split_input = hidden
    try:
        out = model(input_ids=ids, attention_mask=attention_mask)
    finally:
        root.fedlab_split_input = None
    if part == "back":
        return out
    sent = root.fedlab_split_output
    root.fedlab_split_output = None
    return sent
