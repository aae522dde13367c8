"""ELSA's edge servers and the client's end of the link (paper 002 §3.2).

Per training step of client n (one mini-batch; see `fedlab.methods.elsa.split_step` for the same exchange as one
function):

  client: H = front(x);  H̃ = H 𝒬_nᵀ (SS-OP, uplink only);  S_up = sketch(H̃)                      → edge
  edge:   Ĥ = unsketch(S_up);  H₂ = middle_θ₂ⁿ(Ĥ);  S_down = sketch(H₂)                           → client
  client: Ĥ₂ = unsketch(S_down);  loss = L(back(Ĥ₂), y);  G_down = sketch(∂L/∂Ĥ₂)                 → edge
  edge:   H₂.backward(unsketch(G_down)); AdamW step of θ₂ⁿ;  G_up = sketch(∂L/∂Ĥ)                   → client
  client: ∂L/∂H = unsketch(G_up) 𝒬_n;  the rest of the backward; its optimiser steps θ₁, θ₃, head

The edge is its own party: an `EdgeServer` object in-process, a Ray actor on the Ray backend (the clients'
actors call it by name), so activations and gradients cross a process boundary at every step. It keeps one
θ₂ⁿ per member (leaf tensors run through the shared frozen middle model with `torch.func.functional_call`) for
the ϱ steps of a global round, then averages its group: θ_{g,k} = Σ_n |D_n| [θ₁ⁿ, θ₂ⁿ, θ₃ⁿ, headⁿ] / Σ |D_n|.

The pair's codec (count sketch, its hashes fixed or drawn per step, or the noise control: `codec.py`) is built
on both sides from the same seed (`link_codec`); the edge never sees the
text, the labels, 𝒬_n or the client's parameters. Dropout on the edge draws from a generator seeded by
(run seed, round, client, step), so the numbers do not depend on where the edge runs."""
from __future__ import annotations

import torch

from fedlab.methods.elsa.aggregate import edge_average
from fedlab.methods.elsa.codec import LinkCodec, cosine
from fedlab.methods.elsa.schedule import at_round
from fedlab.seeding import derive_seed


def link_codec(cfg, cid: int, dim: int) -> LinkCodec:
    """What the link of client `cid` and its edge does to the tensors it carries (`codec.LinkCodec`)."""
    return LinkCodec(cfg, cid, dim)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class ClientLink:
    """The client's end: rotation 𝒬_n (None: no SS-OP), the pair's codec, the edge, the round, and the bytes
    sent each way (activations, the int8 mask and gradients); `cosines` holds the reconstruction cosine of
    every uplink activation the edge reads."""

    def __init__(self, edge, cid: int, codec: LinkCodec, rotation: torch.Tensor | None = None, rnd: int = 0):
        self.edge, self.cid, self.codec, self.rotation, self.round = edge, cid, codec, rotation, rnd
        self.mask = None
        self.bytes_up = self.bytes_down = 0
        self.steps = 0
        self.cosines: list[float] = []

    def forward(self, hidden: torch.Tensor, train: bool) -> torch.Tensor:
        # the wire is on the CPU (rotation, codec, what the edge is sent); the answer goes back to the model's device
        h = hidden.detach().cpu()
        mask = self.mask.cpu()
        if self.rotation is not None:
            h = h @ self.rotation.T.to(h.dtype)
        up = self.codec.pack(h, self.round, self.steps, "act-up")
        if self.codec.ratio_asked > 1:
            self.cosines.append(cosine(h, self.codec.unpack(up, self.round, self.steps), mask))
        mask8 = mask.to(torch.int8)
        down = self.edge.forward(self.cid, up, mask8, train)
        self.bytes_up += _nbytes(up) + _nbytes(mask8)
        self.bytes_down += _nbytes(down)
        return self.codec.unpack(down, self.round, self.steps).to(hidden.device, hidden.dtype)

    def backward(self, grad: torch.Tensor) -> torch.Tensor:
        g_down = self.codec.pack(grad.detach().cpu(), self.round, self.steps, "grad-down")
        g_up = self.edge.backward(self.cid, g_down)
        self.bytes_up += _nbytes(g_down)
        self.bytes_down += _nbytes(g_up)
        g = self.codec.unpack(g_up, self.round, self.steps).to(grad.dtype)
        self.steps += 1
        return (g if self.rotation is None else g @ self.rotation.to(g.dtype)).to(grad.device)


class EdgeServer:
    """One edge (module docstring). `start(round, state, members)` gives each member θ₂ⁿ = the global middle
    state; `forward`/`backward` serve the members' steps; `aggregate` averages the group."""

    def __init__(self, cfg, edge_id: int, payload=None):
        from fedlab.methods.elsa.chains import middle_chain
        from fedlab.runtime.resident import get_resident

        torch.set_num_threads(cfg.backend.threads)
        self.cfg, self.edge_id = cfg, edge_id
        res = get_resident(cfg, cfg.model.name, payload, middle_chain(cfg))
        self.model, self.keys = res.model, res.spec.trainable
        self.dim = res.model.config.hidden_size
        self.params: dict[int, dict] = {}
        self.opts: dict[int, torch.optim.Optimizer] = {}
        self.codecs: dict[int, LinkCodec] = {}
        self.pending: dict[int, tuple] = {}
        self.steps: dict[int, int] = {}
        self.round = 0

    def ready(self) -> bool:
        return True

    def start(self, rnd: int, state: dict, members: list[int], moments: dict | None = None,
              shared: bool = False) -> None:
        """`moments` (FedCAda): the federation's Adam moments of the middle blocks' parameters. `shared` (Simple
        SL): one θ₂ and one optimiser that every member's steps update in turn, instead of one θ₂ⁿ each."""
        cfg = at_round(self.cfg, rnd)                  # method.lr_schedule
        f = cfg.federation
        self.round = rnd
        self.params, self.opts, self.pending, self.steps = {}, {}, {}, {}
        for cid in members:
            self.steps[cid] = 0
            if cid not in self.codecs:
                self.codecs[cid] = link_codec(self.cfg, cid, self.dim)
            if shared and self.params:
                first = next(iter(self.params))
                self.params[cid], self.opts[cid] = self.params[first], self.opts[first]
                continue
            device = next(self.model.parameters()).device     # θ₂ⁿ lives with the edge's model
            p = {k: state[k].to(device, copy=True).requires_grad_(True) for k in self.keys}
            self.params[cid] = p
            if self.cfg.method.client_opt == "fedcada":
                from fedlab.methods.elsa.fedcada import fedcada_factory

                self.opts[cid] = fedcada_factory(cfg, rnd, moments if moments else None)(
                    list(p.values()), list(p))
            elif self.cfg.method.client_opt == "sgd":
                from fedlab.objectives.training import sgd_factory

                self.opts[cid] = sgd_factory(cfg)(list(p.values()), list(p))
            else:
                self.opts[cid] = torch.optim.AdamW(list(p.values()), lr=f.lr, weight_decay=f.weight_decay,
                                                   betas=tuple(f.betas))

    def _run(self, cid: int, hidden: torch.Tensor, mask: torch.Tensor, train: bool) -> torch.Tensor:
        from torch.func import functional_call

        from fedlab.transforms.split import _root

        root = _root(self.model)
        self.model.train(train)
        gen_seed = derive_seed(self.cfg.seed, "elsa-edge", self.round, cid, self.steps[cid])
        device = next(self.model.parameters()).device      # the edge's model: the wire's tensors move to it
        root.fedlab_split_input = hidden.to(device)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(gen_seed)
                ids = torch.zeros(mask.shape, dtype=torch.long, device=device)
                functional_call(self.model, self.params[cid], (),
                                {"input_ids": ids, "attention_mask": mask.to(device).long()}, strict=False)
        finally:
            root.fedlab_split_input = None
        out = root.fedlab_split_output
        root.fedlab_split_output = None
        return out

    def forward(self, cid: int, payload, mask, train: bool):
        codec, step = self.codecs[cid], self.steps[cid]
        h = codec.unpack(payload, self.round, step)
        if not train:
            with torch.no_grad():
                return codec.pack(self._run(cid, h, mask, False).cpu(), self.round, step, "act-down")
        with torch.enable_grad():     # in-process the call comes from inside the client's autograd function
            h = h.detach().requires_grad_(True)
            out = self._run(cid, h, mask, True)
        self.pending[cid] = (h, out)
        return codec.pack(out.detach().cpu(), self.round, step, "act-down")

    def backward(self, cid: int, grad_payload):
        h, out = self.pending.pop(cid)
        codec, step = self.codecs[cid], self.steps[cid]
        opt = self.opts[cid]
        opt.zero_grad(set_to_none=True)
        with torch.enable_grad():
            out.backward(codec.unpack(grad_payload, self.round, step).to(out.device))
        params = list(self.params[cid].values())
        torch.nn.utils.clip_grad_norm_(params, 1.0)      # as the client's trainer clips its own
        opt.step()
        self.steps[cid] += 1
        return codec.pack(h.grad, self.round, step, "grad-up")

    def states(self) -> dict[int, dict]:
        return {cid: {k: v.detach().cpu().clone() for k, v in p.items()} for cid, p in self.params.items()}

    def aggregate(self, client_states: dict, sizes: dict, client_moments: dict | None = None):
        """θ_{g,k}: each member's [θ₁, θ₃, head] (uploaded to this edge) joined with its θ₂ⁿ, averaged by
        |D_n|. With FedCAda's `client_moments` ({cid: moments}): (θ_{g,k}, the moments of all of them
        averaged the same way)."""
        cids = sorted(client_states)
        whole = [{**client_states[c],
                  **{k: v.detach().cpu() for k, v in self.params[c].items()}} for c in cids]
        theta = edge_average(whole, [sizes[c] for c in cids])
        if client_moments is None:
            return theta
        from fedlab.methods.elsa.fedcada import average_moments

        joined = []
        for c in cids:
            mine, edge = client_moments[c], _cpu(self.opts[c].export())
            joined.append({"m": {**mine["m"], **edge["m"]}, "v": {**mine["v"], **edge["v"]},
                           "k": max(int(mine["k"]), int(edge["k"]))})
        return theta, average_moments(joined, [float(sizes[c]) for c in cids])


def _cpu(x):
    """A tree of tensors (dicts, tuples) on the CPU: what the edge hands over leaves its device."""
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, dict):
        return {k: _cpu(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_cpu(v) for v in x)
    return x


class EdgeHandle:
    """How a client (or the cloud) reaches an edge by name, wherever the backend runs it
    (`fedlab.runtime.parties`)."""

    def __init__(self, name: str):
        from fedlab.runtime.parties import PartyHandle

        self.party = PartyHandle(name)

    def forward(self, cid, payload, mask, train):
        return self.party.call("forward", cid, payload, mask, train)

    def backward(self, cid, grad):
        return self.party.call("backward", cid, grad)

    def start(self, rnd, state, members, moments=None, shared=False):
        return self.party.call("start", rnd, state, members, moments, shared)

    def aggregate(self, client_states, sizes, client_moments=None):
        return self.party.call("aggregate", client_states, sizes, client_moments)


def start_edges(cfg, names: list[str]) -> None:
    """Start the named edges through the run's backend: objects in this process, or parties of their own (built
    from the base model's payload there)."""
    from fedlab.runtime import parties
    from fedlab.runtime.resident import base_payload

    parties.start(cfg, EdgeServer, {name: (i,) for i, name in enumerate(names)},
                  payload=lambda: base_payload(cfg.model.name))


def stop_edges(cfg, names: list[str]) -> None:
    from fedlab.runtime import parties

    parties.stop(names)
