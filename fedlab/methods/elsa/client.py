"""ELSA's client (paper 002 §3.1–3.2): a classification loss on the encoder's head (on its pooled vector),
trained

- `mode: warmup` — the whole model locally (uncompressed) for `warmup_steps`, then the [CLS] embeddings of the
  public probe texts go up (T_n [Q, D]: the fingerprint's samples; no parameters leave);
- `mode: split` — the client's view of the split model for ϱ steps with its edge (`fedlab.methods.elsa.edge`):
  it sends sketched, SS-OP-rotated activations and receives the edge's; it uploads [θ₁, θ₃, head]; its
  steps are `rho_steps`, or ⌈local_epochs·|D_n|/B⌉ when `local_epochs` is set;

and evaluated as deployed: the cloud's θ_g through the client's own link — Part 1,
𝒬_n, the codec, θ₂, the codec back, Part 3 and the head (`acc/…`) — with the whole uncompressed model's
accuracy beside it (`full/acc/…`)."""
from __future__ import annotations

import math
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from fedlab.comm.messages import EvalIns, EvalRes, FitIns, FitRes
from fedlab.comm.ssop import client_seed, ssop_matrix
from fedlab.methods.client import LoraClient
from fedlab.methods.elsa.chains import client_chain, cuts, full_chain, label_space, task_classes
from fedlab.methods.elsa.deployed import capture_front, split_path
from fedlab.methods.elsa.edge import ClientLink, EdgeHandle, link_codec
from fedlab.methods.elsa.model import root_of
from fedlab.methods.elsa.schedule import at_round
from fedlab.objectives.modules import ClientModule, Weighted, fit_metrics
from fedlab.objectives.terms import ProximalTerm
from fedlab.objectives.training import make_trainer, optimizer_args, sgd_factory
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms import get_state, set_state
from fedlab.transforms.lora import flatten_state


class ClassExamples(Dataset):
    """(token ids, class index, the task's allowed classes) per example."""

    def __init__(self, tokenizer, examples, space: tuple[str, ...], allowed: dict, max_length: int):
        index = {c: i for i, c in enumerate(space)}
        self.items = []
        for e in examples:
            ids = tokenizer(e.prompt, truncation=True, max_length=max_length)["input_ids"]
            self.items.append({"input_ids": ids, "label": index[e.target], "allowed": allowed[e.task]})
        self.num_labels = len(space)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class ClassCollator:
    def __init__(self, pad_id: int, num_labels: int):
        self.pad_id, self.num_labels = pad_id, num_labels

    def __call__(self, items):
        n = max(len(it["input_ids"]) for it in items)
        ids = torch.full((len(items), n), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(items), n), dtype=torch.long)
        allowed = torch.zeros((len(items), self.num_labels), dtype=torch.bool)
        for i, it in enumerate(items):
            ids[i, :len(it["input_ids"])] = torch.tensor(it["input_ids"])
            mask[i, :len(it["input_ids"])] = 1
            allowed[i, list(it["allowed"])] = True
        return {"input_ids": ids, "attention_mask": mask, "allowed": allowed,
                "class_label": torch.tensor([it["label"] for it in items])}


def masked_logits(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Logits with the classes outside the example's task pushed to −1e4 (softmax weight ≈ 0)."""
    return logits.masked_fill(~allowed, -1e4)


class ClassificationLoss(nn.Module):
    """L = CE(softmax over the task's classes of W·h + τ·log π_n, y): with τ = 0 plain cross-entropy; with τ > 0
    the logit-adjusted loss (Menon et al. 2021; FedLC, Zhang et al. 2022, uses a related per-class margin for label
    skew in FL) for the client's own class prior π_n,
    so that the client fits p(x | y) rather than its skewed p(y | x). Only training uses it: prediction is the
    argmax of the unadjusted logits."""
    name = "task"

    def __init__(self, log_prior: torch.Tensor | None = None):
        super().__init__()
        self.log_prior = log_prior

    def forward(self, module, batch, outputs):
        logits = outputs.logits
        if self.log_prior is not None:
            logits = logits + self.log_prior.to(logits.dtype)
        return nn.functional.cross_entropy(masked_logits(logits, batch["allowed"]), batch["class_label"])


def log_class_prior(labels: list[int], num_labels: int, tau: float) -> torch.Tensor:
    """τ·log π with π_c = (n_c + 1)/(N + C): the client's label frequencies, add-one smoothed so that a class
    it never holds keeps a finite logit."""
    counts = torch.bincount(torch.tensor(labels, dtype=torch.long), minlength=num_labels).double()
    return (tau * torch.log((counts + 1.0) / (counts.sum() + num_labels))).float()


class ClassifierModule(ClientModule):
    def __init__(self, *args, log_prior: torch.Tensor | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.task = ClassificationLoss(log_prior)


@torch.no_grad()
def cls_embeddings(model, tokenizer, texts: list[str], max_length: int, batch_size: int = 32,
                   what: str = "pooled") -> torch.Tensor:
    """[Q, D] pooled vectors (the head's input: mean or [CLS], `method.pooling`) of the whole model's last
    layer; with what="predictions" [Q, C] the head's log-probabilities log p(y | text) instead."""
    model.eval()
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i:i + batch_size], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        o = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
        out.append((o.pooled if what == "pooled" else torch.log_softmax(o.logits, dim=-1)).cpu())
    return torch.cat(out)


class ElsaClient(LoraClient):
    def __init__(self, host, cid):
        self.rotation = None     # 𝒬_n, drawn at the client's first split round and kept
        super().__init__(host, cid)

    # what the client keeps between rounds (checkpointed, restored on resume): its rotation 𝒬_n only — every
    # fit starts from the state the cloud sends
    @property
    def own_state(self):
        return None if self.rotation is None else {"rotation": self.rotation}

    @own_state.setter
    def own_state(self, value):
        self.rotation = None if not value else value["rotation"]

    # ------------------------------------------------------------------ data
    def _space(self):
        data = self.host.data
        if "elsa_space" not in self.host.shared:
            self.host.shared["elsa_space"] = (label_space(data), task_classes(data))
        return self.host.shared["elsa_space"]

    def class_dataset(self, key: str, examples):
        if key not in self._datasets:
            space, allowed = self._space()
            self._datasets[key] = ClassExamples(self.resident.tokenizer, list(examples), space, allowed,
                                                self.cfg.model.max_length)
        return self._datasets[key]

    def loader(self, ds, seed: int, shuffle: bool = True) -> DataLoader:
        return DataLoader(ds, batch_size=self.cfg.federation.batch_size, shuffle=shuffle,
                          generator=torch.Generator().manual_seed(seed),
                          collate_fn=ClassCollator(self.resident.tokenizer.pad_token_id, ds.num_labels))

    # ------------------------------------------------------------------ fit
    def use_model(self, ins) -> None:
        mode = ins.config.get("mode", "eval")
        self.chain = client_chain(self.cfg) if mode == "split" else full_chain(self.cfg)

    def fit(self, ins: FitIns) -> FitRes:
        self.use_model(ins)
        res = self.resident
        start = {k: v for k, v in ins.state.items() if k in set(res.spec.communicated)}
        set_state(res.model, start)
        seed = derive_seed(self.cfg.seed, "fit", ins.round, self.cid)
        seed_everything(seed)
        ds = self.class_dataset("own", self.host.data.train[self.cid])
        mode = ins.config["mode"]
        m = self.cfg.method
        t0 = time.perf_counter()
        link = None
        if mode == "split":
            link = self.make_link(res, ds, ins.round, ins.config["edge"])
            root_of(res.model).link = link
        terms = []
        if m.prox_mu > 0 and mode == "split":
            keys = tuple(res.spec.communicated)
            terms.append(Weighted(1.0, ProximalTerm(keys, flatten_state(start, keys), m.prox_mu)))
        cfg = at_round(self.cfg, ins.round)            # method.lr_schedule
        prior = (log_class_prior([it["label"] for it in ds.items], ds.num_labels, m.logit_adjust)
                 if m.logit_adjust > 0 else None)
        module = ClassifierModule(res.model, res.spec.trainable, terms, log_prior=prior,
                                  **optimizer_args(cfg, cfg.federation.lr))
        if m.client_opt == "sgd":
            module.optimizer_factory = sgd_factory(cfg)
        if m.client_opt == "fedcada" and mode == "split":
            from fedlab.methods.elsa.fedcada import fedcada_factory, from_wire

            module.optimizer_factory = fedcada_factory(cfg, ins.round, from_wire(ins.aux))
        steps = m.warmup_steps if mode == "warmup" else split_steps(m, len(ds), self.cfg.federation.batch_size)
        res.model.train()
        try:
            make_trainer(self.cfg, max_steps=steps).fit(module, self.loader(ds, seed))
        finally:
            res.model.eval()
            root_of(res.model).link = None
        metrics = fit_metrics(module)
        metrics["time/fit"] = time.perf_counter() - t0
        if mode == "warmup":
            probe = [e.prompt for e in self.host.data.public[:m.probe_size]]
            emb = cls_embeddings(res.model, res.tokenizer, probe, self.cfg.model.max_length, what=m.fingerprint)
            return FitRes(self.cid, ins.round, None, len(ds), metrics, aux={"probe": emb})
        metrics.update({"link/bytes_up": float(link.bytes_up), "link/bytes_down": float(link.bytes_down),
                        "link/steps": float(link.steps),
                        **({"link/cosine": sum(link.cosines) / len(link.cosines)} if link.cosines else {}),
                        "link/batch": float(min(self.cfg.federation.batch_size, len(ds)))})
        state = get_state(res.model, res.spec.communicated)
        aux = None
        if module.built_optimizer is not None and hasattr(module.built_optimizer, "export"):
            from fedlab.methods.elsa.fedcada import to_wire

            aux = to_wire(module.built_optimizer.export())             # FedCAda: the moments go up too
        return FitRes(self.cid, ins.round, state, len(ds), metrics, aux=aux)

    def ensure_rotation(self, model, ds) -> torch.Tensor | None:
        """𝒬_n (None without SS-OP), drawn once from J_n = the layer-p inputs of the client's first
        `ssop_tokens` token vectors (its data in a seeded order that does not depend on the round) under the
        state `model` holds — θ_0's front blocks at the client's first split round or first evaluation,
        whichever comes first, so both give the same 𝒬_n. Kept for the run (and checkpointed with the client):
        the edge's θ₂ learns on rotated activations, and a rotation drawn anew every round would move them
        under it."""
        m = self.cfg.method
        if m.ssop_rank > 0 and self.rotation is None:
            batches = self.loader(ds, derive_seed(self.cfg.seed, "ssop", self.cid), shuffle=True)
            J = capture_front(model, batches, cuts(self.cfg)[0], m.ssop_tokens)
            self.rotation = ssop_matrix(J, m.ssop_rank, client_seed(m.ssop_salt, self.cid))
        return self.rotation

    def make_link(self, res, ds, rnd: int, edge_name: str) -> ClientLink:
        """The link to this round's edge: the pair's codec and 𝒬_n (`ensure_rotation`)."""
        rotation = self.ensure_rotation(res.model, ds)
        dim = res.model.config.hidden_size
        return ClientLink(EdgeHandle(edge_name), self.cid, link_codec(self.cfg, self.cid, dim), rotation, rnd)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, ins: EvalIns) -> EvalRes:
        """Per task: the accuracy of the split path as deployed (`acc/…`, module docstring) and of the whole
        uncompressed model (`full/acc/…`); the uplink's reconstruction cosine (`link/cosine`).

        Every client is sent the same θ_g and scores the shared test sets, so the whole model's count is
        computed once per process and (round, θ_g, task); the split path is each client's own, except where
        the link is the identity (ρ = 1 and no SS-OP), where it is the whole model's computation exactly."""
        self.use_model(ins)
        res = self.resident
        state = {k: v for k, v in ins.state.items() if k in set(res.spec.communicated)}
        set_state(res.model, state)
        res.model.eval()
        rotation = self.ensure_rotation(res.model, self.class_dataset("own", self.host.data.train[self.cid]))
        codec = link_codec(self.cfg, self.cid, res.model.config.hidden_size)
        identity = rotation is None and codec.ratio_asked <= 1
        tag = (ins.round, float(sum(v.double().sum() for v in state.values())))
        cache = self.host.shared.setdefault("elsa_full_counts", {})
        metrics: dict = {}
        cos: list[float] = []
        for task in self.host.data.client_tasks(self.cid):
            examples = self.host.data.test_examples(task, self.cid)
            ds = self.class_dataset(f"test/{task}", examples)
            shared = self.host.data.client_test is None
            full = cache.get((*tag, task)) if shared else None
            if full is None:
                full = self._score(res.model, self.loader(ds, 0, shuffle=False))
                if shared:
                    cache[(*tag, task)] = full
            split = full
            if not identity:
                with split_path(res.model, cuts(self.cfg), codec, rotation, ins.round) as c:
                    split = self._score(res.model, self.loader(ds, 0, shuffle=False))
                cos += c
            metrics[f"acc/{task}"] = split[0] / max(1, len(ds))
            # the split path's most frequent answer's share (1.0: one constant answer)
            metrics[f"top/{task}"] = split[1] / max(1, len(ds))
            metrics[f"full/acc/{task}"] = full[0] / max(1, len(ds))
            metrics[f"n/{task}"] = len(ds)
        if cos:
            metrics["link/cosine"] = sum(cos) / len(cos)
        return EvalRes(self.cid, ins.round, metrics)

    @staticmethod
    def _score(model, batches) -> tuple[int, int]:
        """(correct answers, count of the most frequent predicted class) over the batches."""
        correct, counts = 0, {}
        for batch in batches:
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            pred = masked_logits(out.logits.cpu(), batch["allowed"]).argmax(-1)
            correct += int((pred == batch["class_label"]).sum())
            for c in pred.tolist():
                counts[c] = counts.get(c, 0) + 1
        return correct, max(counts.values(), default=0)


def split_steps(m, size: int, batch_size: int) -> int:
    """A client's split steps per round: ϱ (`rho_steps`), or ⌈local_epochs·|D_n|/B⌉ (at least 1)."""
    if m.local_epochs is None:
        return m.rho_steps
    return max(1, math.ceil(m.local_epochs * size / batch_size))
