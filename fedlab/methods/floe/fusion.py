"""Floe's LLM–SLM logit fusion (Eq. 12–15).

    w     = sigmoid(MLP([P_SLM; P_LLM]))          per token (compact features as an ablation)
    P_out = w · P_SLM + (1 − w) · P_LLM

Both models are frozen; the MLP (`FusionGate`, a LightningModule) is trained on public data, teacher-forced,
to minimise −log P_out(next token). The LLM stays zero-shot and sees only the prompt and the tokens so far —
never a prompt the privacy detector flags (then w = 1 and no LLM call). At every step both models read the
same sequence — the same token ids with a shared vocabulary, else the SLM's ids decoded as one text and
tokenised by the LLM — and predict what follows it; when the vocabularies differ, the LLM's probability
of each of its tokens is summed into the SLM bin its token maps to (`fedlab.align.vocab`'s map) and
renormalised, and decoding is in the SLM's vocabulary. With a shared tokenizer (the default experiment)
the map is the identity.

Fallback: the LLM's answer for a token arrives after RTT + t_cloud (simulated RTT with seeded jitter; t_cloud
the cloud's compute per token, simulated by default — `method.fusion_cloud_ms` — so that which tokens fall
back, hence every score, never depends on how fast or busy this machine is; null measures the LLM's forward
here); when that exceeds τ_wait the token uses w = 1. Latency per token = max(t_edge, min(RTT + t_cloud,
τ_wait)), t_edge the SLM's measured time."""
from __future__ import annotations

import random
import time

import lightning as L
import torch
from torch import nn


def map_probs(p_src: torch.Tensor, vmap: torch.Tensor, v_tgt: int) -> torch.Tensor:
    """[..., V_src] → [..., V_tgt]: each source token's probability summed into the bin `vmap` sends it to,
    renormalised. Logit columns beyond the tokenizer's vocabulary (models whose embedding is padded, e.g.
    Qwen2's) have no token and are dropped."""
    p_src = p_src[..., : len(vmap)]
    out = torch.zeros(*p_src.shape[:-1], v_tgt, dtype=p_src.dtype, device=p_src.device)
    out.index_add_(-1, vmap[: p_src.shape[-1]].to(p_src.device), p_src)
    return out / out.sum(-1, keepdim=True).clamp_min(1e-12)


def mix(w: torch.Tensor, p_slm: torch.Tensor, p_llm: torch.Tensor) -> torch.Tensor:
    """Eq. 15: P_out = w·P_SLM + (1 − w)·P_LLM, one w per row of [N, V] distributions."""
    return w[:, None] * p_slm + (1 - w[:, None]) * p_llm


def mixture_nll(w: torch.Tensor, p_slm: torch.Tensor, p_llm: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean −log P_out(target): what the fusion gate minimises."""
    return -mix(w, p_slm, p_llm).gather(-1, target[:, None]).clamp_min(1e-12).log().mean()


def compact_features(p_slm: torch.Tensor, p_llm: torch.Tensor) -> torch.Tensor:
    """[N, 5]: each side's max probability and entropy, and their overlap Σ min(P_SLM, P_LLM)."""
    ent = lambda p: -(p * p.clamp_min(1e-12).log()).sum(-1)
    return torch.stack([p_slm.max(-1).values, ent(p_slm), p_llm.max(-1).values, ent(p_llm),
                        torch.minimum(p_slm, p_llm).sum(-1)], dim=-1)


class FusionGate(L.LightningModule):
    """w = sigmoid(MLP(features)), trained on (P_SLM, P_LLM, next token) triples."""

    def __init__(self, vocab: int, features: str = "full", hidden: int = 64, lr: float = 1e-3):
        super().__init__()
        self.features, self.lr = features, lr
        width = 2 * vocab if features == "full" else 5
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, p_slm: torch.Tensor, p_llm: torch.Tensor) -> torch.Tensor:
        x = torch.cat([p_slm, p_llm], dim=-1) if self.features == "full" else compact_features(p_slm, p_llm)
        return torch.sigmoid(self.mlp(x)).squeeze(-1)

    def training_step(self, batch, batch_idx):
        p_slm, p_llm, target = batch
        w = self(p_slm, p_llm)
        loss = mixture_nll(w, p_slm, p_llm, target)
        self.log("fusion/nll", loss, on_step=False, on_epoch=True, batch_size=len(target))
        self.log("fusion/w", w.mean(), on_step=False, on_epoch=True, batch_size=len(target))
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


@torch.no_grad()
def next_probs_ids(model, ids: list[int], max_length: int) -> torch.Tensor:
    """[V] the model's next-token distribution after the token ids `ids` (the last `max_length` of them)."""
    device = next(model.parameters()).device
    x = torch.tensor([ids[-max_length:]], device=device)
    return torch.softmax(model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0, -1].float(), -1).cpu()


def llm_ids(slm_tok, llm_tok, ids: list[int], same_vocab: bool) -> list[int]:
    """The LLM's input for the SLM's token ids: the same ids with a shared vocabulary, else the decoded text
    (whole sequence, so word boundaries survive) tokenised by the LLM."""
    if same_vocab:
        return list(ids)
    return llm_tok(slm_tok.decode(ids), add_special_tokens=False)["input_ids"]


class Fusion:
    """Scores and decodes with P_out (module docstring). `slm_for(prompt)` loads the routed SLM for a prompt and
    returns (model, tokenizer); `llm` = (model, tokenizer) of the zero-shot cloud LLM; `flagged(prompt)` is the
    privacy detector's verdict."""

    def __init__(self, slm_for, llm, gate: FusionGate | None, vmap: torch.Tensor, flagged, max_length: int,
                 rtt: float = 0.08, rtt_jitter: float = 0.04, tau_wait: float = 0.2, seed: int = 0,
                 cloud_s: float | None = None):
        self.slm_for, (self.llm, self.llm_tok) = slm_for, llm
        self.gate, self.vmap, self.flagged, self.max_length = gate, vmap, flagged, max_length
        self.rtt, self.rtt_jitter, self.tau_wait, self.cloud_s = rtt, rtt_jitter, tau_wait, cloud_s
        self.rng = random.Random(seed)
        self.stats = {"tokens": 0, "fallback": 0, "flagged_prompts": 0, "llm_calls": 0, "w_sum": 0.0,
                      "latency_sum": 0.0, "edge_sum": 0.0, "network_sum": 0.0}
        # per token: (edge seconds, cloud seconds or None when flagged, RTT jitter drawn, w used)
        self.trace: list[tuple[float, float | None, float, float]] = []

    def _w(self, p_slm: torch.Tensor, p_llm: torch.Tensor) -> torch.Tensor:
        if self.gate is None:
            return torch.full((p_slm.shape[0],), 0.5)
        with torch.no_grad():
            return self.gate(p_slm, p_llm).cpu()

    def _jitter(self) -> float:
        return self.rng.uniform(-self.rtt_jitter, self.rtt_jitter)

    def fused_step(self, prompt: str, ids: list[int]) -> torch.Tensor:
        """P_out of the next token after the SLM token ids `ids` (the prompt's, then the answer so far), in the
        SLM's vocabulary; the LLM reads the same ids (shared vocabulary) or the same decoded text."""
        model, tok = self.slm_for(prompt)
        t0 = time.perf_counter()
        p_slm = next_probs_ids(model, ids, self.max_length)[None]
        t_edge = time.perf_counter() - t0
        self.stats["tokens"] += 1
        self.stats["edge_sum"] += t_edge                     # measured
        if self.flagged(prompt):           # no LLM call at all
            self.stats["w_sum"] += 1.0
            self.stats["latency_sum"] += t_edge
            self.trace.append((t_edge, None, 0.0, 1.0))
            return p_slm[0]
        t0 = time.perf_counter()
        same = self._same_vocab(tok)
        p_llm = next_probs_ids(self.llm, llm_ids(tok, self.llm_tok, ids, same), self.max_length)[None]
        p_llm = p_llm if same else map_probs(p_llm, self.vmap, p_slm.shape[-1])
        self.stats["llm_calls"] += 1
        t_cloud = time.perf_counter() - t0 if self.cloud_s is None else self.cloud_s
        jitter = self._jitter()
        cloud = max(0.0, self.rtt + jitter) + t_cloud      # simulated RTT (seeded jitter) + the cloud's time
        self.stats["latency_sum"] += max(t_edge, min(cloud, self.tau_wait))
        self.stats["network_sum"] += min(cloud, self.tau_wait)   # simulated (RTT + cloud), capped at the wait
        if cloud > self.tau_wait:
            self.stats["fallback"] += 1
            self.stats["w_sum"] += 1.0
            self.trace.append((t_edge, t_cloud, jitter, 1.0))
            return p_slm[0]
        w = self._w(p_slm, p_llm)
        self.stats["w_sum"] += float(w[0])
        self.trace.append((t_edge, t_cloud, jitter, float(w[0])))
        return mix(w, p_slm, p_llm)[0]

    def _same_vocab(self, tok) -> bool:
        if getattr(self, "_same", None) is None:
            self._same = tok.get_vocab() == self.llm_tok.get_vocab()
        return self._same

    def generate(self, prompt: str, max_new_tokens: int = 24) -> str:
        """Greedy decoding with P_out, in the SLM's vocabulary, stopping at the SLM's EOS."""
        _, tok = self.slm_for(prompt)
        ctx = tok(prompt, add_special_tokens=False)["input_ids"]
        new: list[int] = []
        for _ in range(max_new_tokens):
            nxt = int(self.fused_step(prompt, ctx + new).argmax())
            if nxt == tok.eos_token_id:
                break
            new.append(nxt)
        return tok.decode(new, skip_special_tokens=True).strip()

    def choice_score(self, prompt: str, choice: str) -> float:
        """Σ log P_out over the choice's tokens (teacher-forced, one fused step per token), tokenised as the
        multiple-choice scorer does (`continuation_ids`)."""
        from fedlab.data.collate import continuation_ids

        _, tok = self.slm_for(prompt)
        ctx, cont = continuation_ids(tok, prompt, " " + choice)
        total = 0.0
        for k, t in enumerate(cont):
            p = self.fused_step(prompt, ctx + cont[:k])
            total += float(p[t].clamp_min(1e-12).log())
        return total


def is_held_out(rank: int, every: int = 5) -> bool:
    """Whether a task's `rank`-th public example (0-based, in reading order) is held out: every `every`-th one."""
    return rank % every == every - 1


def water_fill(capacity: dict[str, int], total: int) -> dict[str, int]:
    """Per-task quotas summing to min(total, Σ capacity): an equal share each, capped at the task's capacity, what
    a capped task cannot use shared among the others (max–min fair), e.g. caps {a: 3, b: 100, c: 100}, total 30 →
    {a: 3, b: 14, c: 13}."""
    quota: dict[str, int] = {}
    left = total
    order = sorted(capacity, key=lambda t: (capacity[t], t))
    for i, t in enumerate(order):
        share = -(-left // (len(order) - i))
        quota[t] = min(capacity[t], share)
        left -= quota[t]
    return quota


def gate_examples(slm_for, llm, vmap: torch.Tensor, examples, max_length: int, limit: int = 2048, every: int = 5):
    """(P_SLM [N, V], P_LLM mapped [N, V], next token [N], task of each position [N], the example each position
    comes from [N]) at the answer tokens of public `examples`, teacher-forced (each answer prefix read by both
    models, as token ids). `limit` counts the positions the gate *trains* on (default 2,048), balanced over
    the tasks by `water_fill` — an equal share each, a task whose answers run out (one-token choices) leaving the
    rest of its share to the others — so long generated answers do not crowd out one-token choices. Each task's
    examples are read in order; every `every`-th one (`is_held_out`, the split `split_held_out` recovers) is
    read whole on top, for the held-out check, up to the last example the gate trains on."""
    from fedlab.data.collate import continuation_ids

    llm_model, llm_tok = llm
    by_task: dict[str, list] = {}
    for e in examples:
        by_task.setdefault(e.task, []).append(e)
    if not by_task:
        raise ValueError("gate_examples: no public examples to train the fusion gate on")
    _, tok = slm_for(next(iter(by_task.values()))[0].prompt)      # one tokenizer serves every mixture
    same = tok.get_vocab() == llm_tok.get_vocab()
    answers = {t: [continuation_ids(tok, e.prompt, " " + e.target) for e in es] for t, es in by_task.items()}
    capacity = {t: sum(len(cont) for r, (_, cont) in enumerate(a) if not is_held_out(r, every))
                for t, a in answers.items()}
    quota = water_fill(capacity, limit)
    ps, pl, ys, tasks, owners = [], [], [], [], []
    owner = 0
    for t, es in by_task.items():
        trained = 0
        for r, (e, (ctx, cont)) in enumerate(zip(es, answers[t])):
            if trained >= quota[t]:
                break
            held = is_held_out(r, every)
            model, _ = slm_for(e.prompt)
            for k, y in enumerate(cont):
                if not held and trained >= quota[t]:
                    break
                ids = ctx + cont[:k]
                p_s = next_probs_ids(model, ids, max_length)
                p_l = next_probs_ids(llm_model, llm_ids(tok, llm_tok, ids, same), max_length)
                ps.append(p_s)
                pl.append(p_l if same else map_probs(p_l[None], vmap, p_s.shape[-1])[0])
                ys.append(y)
                tasks.append(t)
                owners.append(owner)
                trained += not held
            owner += 1
    return torch.stack(ps), torch.stack(pl), torch.tensor(ys), tasks, owners


def fused_nll(w: torch.Tensor, p_slm: torch.Tensor, p_llm: torch.Tensor, target: torch.Tensor) -> float:
    """`mixture_nll` as a number, w a scalar (a fixed weight) or one per position."""
    return float(mixture_nll(torch.as_tensor(w, dtype=p_slm.dtype).expand(len(target)), p_slm, p_llm, target))


def held_out_check(gate, p_slm, p_llm, target, tasks) -> dict:
    """The gate's check on the held-out positions (README (FL-12)): NLL(P_out) against NLL(P_SLM) (w = 1) and
    NLL(P_LLM) (w = 0), `fused/gate_check` 1.0 when NLL(P_out) ≤ the smaller; the gate's mean w per task
    (`fused/gate_w/<task>`)."""
    with torch.no_grad():
        w = gate(p_slm, p_llm)
    out = {"fused/heldout_nll": fused_nll(w, p_slm, p_llm, target),
           "fused/heldout_nll_slm": fused_nll(1.0, p_slm, p_llm, target),
           "fused/heldout_nll_llm": fused_nll(0.0, p_slm, p_llm, target),
           "fused/heldout_positions": len(target)}
    out["fused/gate_check"] = float(out["fused/heldout_nll"] <= min(out["fused/heldout_nll_slm"], out["fused/heldout_nll_llm"]))
    for t in sorted(set(tasks)):
        idx = torch.tensor([i for i, x in enumerate(tasks) if x == t])
        out[f"fused/gate_w/{t}"] = float(w[idx].mean())
    return out


def split_held_out(tasks: list[str], owners: list[int], every: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, held-out) position indices, split by example: within each task every `every`-th example (in the
    order they were read, `is_held_out`) is held out with all its positions, so no answer has tokens on both
    sides and every task keeps its share."""
    rank: dict[int, int] = {}
    seen: dict[str, int] = {}
    for t, o in zip(tasks, owners):
        if o not in rank:
            rank[o] = seen.get(t, 0)
            seen[t] = rank[o] + 1
    held = torch.tensor([is_held_out(rank[o], every) for o in owners], dtype=torch.bool)
    idx = torch.arange(len(owners))
    return idx[~held], idx[held]


def evaluate_fused(fusion: Fusion, data, per_task: int | None = None) -> dict:
    """{"fused/acc/<task>" | "fused/rougeL/<task>", means, "fused/w_mean", "fused/fallback_share",
    "fused/latency_ms_per_token", "fused/llm_calls", "fused/flagged_prompts"} on the shared test sets."""
    from fedlab.eval.generation import rouge_l_and_em

    out, accs, rouges = {}, [], []
    for task in data.test:
        examples = data.test_examples(task)[:per_task] if per_task else data.test_examples(task)
        if not examples:
            continue
        w0, n0 = fusion.stats["w_sum"], fusion.stats["tokens"]
        fusion.stats["flagged_prompts"] += sum(bool(fusion.flagged(e.prompt)) for e in examples)
        if examples[0].is_choice:
            from fedlab.eval.multiple_choice import accuracy_of, top_answer_share

            picks = []
            for e in examples:
                scores = [fusion.choice_score(e.prompt, c) for c in e.choices]
                picks.append(max(range(len(scores)), key=scores.__getitem__))
            out[f"fused/acc/{task}"] = accuracy_of(examples, picks)
            out[f"fused/top/{task}"] = top_answer_share(examples, picks)   # 1.0: one constant answer
            accs.append(out[f"fused/acc/{task}"])
        else:
            preds = [fusion.generate(e.prompt) for e in examples]
            rl, em = rouge_l_and_em(preds, [e.target for e in examples])
            out[f"fused/rougeL/{task}"], out[f"fused/em/{task}"] = rl, em
            rouges.append(rl)
        if fusion.stats["tokens"] > n0:       # the mean w over this task's fused tokens
            out[f"fused/w/{task}"] = (fusion.stats["w_sum"] - w0) / (fusion.stats["tokens"] - n0)
    if accs:
        out["fused/acc/mean"] = sum(accs) / len(accs)
    if rouges:
        out["fused/rougeL/mean"] = sum(rouges) / len(rouges)
    st = fusion.stats
    n = max(st["tokens"], 1)
    out.update({"fused/w_mean": st["w_sum"] / n, "fused/fallback_share": st["fallback"] / max(st["llm_calls"], 1),
                "fused/latency_ms_per_token": 1000 * st["latency_sum"] / n, "fused/llm_calls": st["llm_calls"],
                "fused/latency_edge_ms_per_token": 1000 * st["edge_sum"] / n,
                "fused/latency_network_ms_per_token": 1000 * st["network_sum"] / n,   # per token, as the edge's
                "fused/flagged_prompts": st["flagged_prompts"]})
    return out


def latency_curve(trace, rtts, tau_wait: float) -> list[dict]:
    """Fig. 16 from the measured per-token times of a run (`Fusion.trace`), for each base RTT in `rtts`:
    latency per token with the fallback, max(t_edge, min(RTT + jitter + t_cloud, τ_wait)); without it (waiting
    for the LLM), max(t_edge, RTT + jitter + t_cloud); and the share of LLM answers that miss τ_wait. Flagged
    tokens cost t_edge in both; `edge_ms` is the mean t_edge alone. Milliseconds."""
    out = []
    edge_ms = 1000 * sum(t[0] for t in trace) / max(len(trace), 1)
    for rtt in rtts:
        bounded = unbounded = missed = calls = 0.0
        for t_edge, t_cloud, jitter, _ in trace:
            if t_cloud is None:
                bounded += t_edge
                unbounded += t_edge
                continue
            cloud = max(0.0, rtt + jitter) + t_cloud
            bounded += max(t_edge, min(cloud, tau_wait))
            unbounded += max(t_edge, cloud)
            missed += cloud > tau_wait
            calls += 1
        n = max(len(trace), 1)
        out.append({"rtt_ms": 1000 * rtt, "latency_ms": 1000 * bounded / n, "wait_ms": 1000 * unbounded / n,
                    "edge_ms": edge_ms, "fallback_share": missed / calls if calls else 0.0})
    return out
