"""ELSA's model as it is deployed, on the whole model's modules:

- `split_path(model, cuts, codec, rotation, rnd)`: while active, the whole model computes what the split
  pipeline computes with no training — the client's Part 1, its link (H̃ = H 𝒬_nᵀ, then the codec: sketch,
  or raw floats), the edge's θ₂ on the received H̃, the link back (the codec again), Part 3 and the head. The
  hooks sit at the two cuts: before block p the activations are rotated and carried over the link; after
  block p + q − 1 they are carried back. The edge's blocks run here, on the client, with the same θ₂ the
  edge would use (θ_g's middle blocks), so no round trip is needed to score it; the numbers are the
  pipeline's (a test compares them with the client's view and a live edge).
- `capture_front(model, batches, cut, tokens)`: J_n, the layer-`cut` inputs (token vectors at attended
  positions) of the first batches, without running the rest of the model."""
from __future__ import annotations

from contextlib import contextmanager

import torch

from fedlab.methods.elsa.codec import EVAL_STEP, cosine
from fedlab.methods.elsa.model import root_of
from fedlab.transforms.split import _blocks


class _Stop(Exception):
    pass


def _hidden_of(args, kwargs):
    return args[0] if args else kwargs["hidden_states"]


def _with_hidden(args, kwargs, h):
    if args:
        return (h, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": h}


@contextmanager
def split_path(model, cuts: tuple[int, int], codec, rotation: torch.Tensor | None, rnd: int):
    """Yields a list that collects the reconstruction cosine of every uplink activation (module docstring)."""
    root = root_of(model)
    blocks = _blocks(root)
    p, stop = cuts
    cosines: list[float] = []

    # the link works on the CPU (as ClientLink does); what it gives back goes to the model's device
    def up(module, args, kwargs):
        h = _hidden_of(args, kwargs)
        x = h.cpu()
        if rotation is not None:
            x = x @ rotation.T.to(h.dtype)
        got = codec.through(x, rnd, EVAL_STEP, "act-up").to(h.dtype)
        if codec.ratio_asked > 1:
            cosines.append(cosine(x, got, root.mask.cpu()))
        return _with_hidden(args, kwargs, got.to(h.device))

    def down(module, args, kwargs, output):
        h = output[0] if isinstance(output, tuple) else output
        got = codec.through(h.cpu(), rnd, EVAL_STEP, "act-down").to(h.device, h.dtype)
        return (got, *output[1:]) if isinstance(output, tuple) else got

    hooks = [blocks[p].register_forward_pre_hook(up, with_kwargs=True),
             blocks[stop - 1].register_forward_hook(down, with_kwargs=True)]
    try:
        yield cosines
    finally:
        for h in hooks:
            h.remove()


@torch.no_grad()
def capture_front(model, batches, cut: int, tokens: int) -> torch.Tensor:
    """J [≤ tokens, D]: the inputs of block `cut` at the attended positions of `batches`, in order, until
    `tokens` rows are gathered (the blocks from `cut` on do not run)."""
    rows: list[torch.Tensor] = []
    root = root_of(model)

    def grab(module, args, kwargs):
        h = _hidden_of(args, kwargs)
        rows.append(h.detach()[root.mask.bool()])
        raise _Stop

    hook = _blocks(root)[cut].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        for batch in batches:
            try:
                model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            except _Stop:
                pass
            if sum(len(r) for r in rows) >= tokens:
                break
    finally:
        hook.remove()
        root.mask = None
    return torch.cat(rows)[:tokens].cpu()
