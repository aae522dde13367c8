"""The federation loop. It knows nothing of Ray: it asks the method what to send, the backend to run it,
the method to aggregate, and the tracker to record. Every round is checkpointed; `resume=true` continues."""
from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fedlab.comm.messages import ClientFailure, EvalRes, FitRes
from fedlab.config import to_yaml
from fedlab.seeding import derive_seed


class FederationError(RuntimeError):
    pass


@dataclass
class History:
    rounds: list[dict] = field(default_factory=list)   # one metrics dict per evaluated round (round 0 = zero-shot)
    final: dict = field(default_factory=dict)
    run_id: str | None = None
    out_dir: str | None = None

    def metric(self, name: str) -> list[tuple[int, float]]:
        return [(r["round"], r[name]) for r in self.rounds if name in r]


def summarize_eval(results: dict) -> dict:
    """Per-client accuracy (mean over its tasks, weighted by test size), per-task accuracy (mean over the
    clients holding the task) and their mean over clients."""
    out: dict = {}
    per_client, per_task = {}, defaultdict(list)
    for cid, r in sorted(results.items()):
        if not isinstance(r, EvalRes):
            continue
        accs = {k[4:]: v for k, v in r.metrics.items() if k.startswith("acc/")}
        if accs:
            n = {t: r.metrics.get(f"n/{t}", 1) for t in accs}
            per_client[cid] = sum(accs[t] * n[t] for t in accs) / max(1, sum(n.values()))
            out[f"acc/client_{cid}"] = per_client[cid]
            if len(accs) > 1:   # clients holding several tasks: each task too (FedMKT's per-model tables)
                out.update({f"acc_client_{cid}/{t}": a for t, a in accs.items()})
        for t, a in accs.items():
            per_task[t].append(a)
        for k, v in r.metrics.items():
            if k.startswith(("rougeL/", "em/")):
                per_task[k].append(v)
    for t, vals in per_task.items():
        name = f"acc/task_{t}" if "/" not in t else f"{t.split('/')[0]}/task_{t.split('/', 1)[1]}"
        out[name] = sum(vals) / len(vals)
    if per_client:
        out["acc/mean"] = sum(per_client.values()) / len(per_client)
    return out


def screen_uploads(rnd: int, results: dict, method) -> tuple[dict, dict[int, str]]:
    """Bad updates are rejected before aggregation: an answer for the wrong round (stale), one that claims
    another client's id or repeats an id (duplicate), non-finite values, and whatever the method's own
    `check_upload` finds (wrong keys or shapes). Returns (accepted results, {cid: reason})."""
    from fedlab.runtime.faults import nonfinite_keys

    ok, rejected = {}, {}
    for cid, r in sorted(results.items()):
        reason = None
        if r.cid != cid:   # answers are keyed by the client that was asked: another id is a duplicate
            what = "duplicate" if r.cid in results else "unknown"
            reason = f"{what} client id (the answer from client {cid} claims to be client {r.cid})"
        elif r.round != rnd:
            reason = f"stale round {r.round} (expected {rnd})"
        else:
            bad = nonfinite_keys(r.state) + nonfinite_keys(r.aux)
            reason = f"non-finite values in {bad[:3]}" if bad else method.check_upload(r)
        if reason:
            rejected[cid] = reason
        else:
            ok[cid] = r
    return ok, rejected


def run_key(cfg) -> str:
    d = cfg.to_dict()
    d.pop("resume", None)
    d.get("tracking", {}).pop("run_name", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_dir(cfg) -> Path:
    return Path(cfg.output_dir) / f"{cfg.method.name}-{run_key(cfg)}"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _save_checkpoint(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


def run_federation(method, backend, cfg, tracker=None, progress: bool = True) -> History:
    from fedlab.tracking import NullTracker

    tracker = tracker or NullTracker()
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(to_yaml(cfg))
    ckpt_path = out / "checkpoint.pt"
    if tracker.run_id:
        (out / "mlflow_run_id").write_text(tracker.run_id)
    # the last round whose metrics reached the tracker: a resumed run logs only what is missing
    marker = out / "logged_round"
    logged = int(marker.read_text()) if cfg.resume and marker.exists() else -1

    def log_round(metrics: dict) -> None:
        nonlocal logged
        if metrics["round"] > logged:
            tracker.log_metrics(metrics, step=metrics["round"])
            logged = metrics["round"]
            marker.write_text(str(logged))

    history = History(run_id=tracker.run_id, out_dir=str(out))
    num_clients = method.data.num_clients
    cids = list(range(num_clients))
    rounds = cfg.federation.rounds if method.trains else 0
    method.tracker, method.out_dir = (tracker if tracker.run_id else None), str(out)
    torch.set_num_threads(cfg.backend.threads)  # server-side compute too: same numbers on every backend
    backend.start(cfg, num_clients)
    start = 1
    method.setup()
    if cfg.resume and ckpt_path.exists():
        ck = torch.load(ckpt_path, weights_only=False)
        method.load_state_dict(ck["method"])
        backend.set_client_states(ck["client_states"])
        history.rounds = ck["history"]
        start = ck["round"] + 1
        random.setstate(ck["py_rng"])
        if "torch_rng" in ck:
            torch.set_rng_state(ck["torch_rng"])
        for past in history.rounds:      # rounds checkpointed but killed before they were logged
            log_round(past)
        _log(f"[fedlab] resuming {out} after round {ck['round']}")
    t_run = time.perf_counter()

    def evaluate(rnd: int) -> dict:
        results = backend.evaluate(method.configure_evaluate(rnd, cids))
        return {**summarize_eval(results), **method.evaluate_server(rnd)}

    if start == 1:
        m = {"round": 0, **evaluate(0)}
        history.rounds.append(m)
        log_round(m)
        if progress:
            _log(f"[fedlab] round 0/{rounds} (zero-shot)  acc {m.get('acc/mean', float('nan')):.4f}")
    for rnd in range(start, rounds + 1):
        t0 = time.perf_counter()
        rng = random.Random(derive_seed(cfg.seed, "sample", rnd))
        k = max(1, round(cfg.federation.client_fraction * num_clients))
        sampled = sorted(rng.sample(cids, k)) if k < num_clients else cids
        m: dict = {"round": rnd, "bytes/down": 0, "bytes/up": 0}
        losses = defaultdict(list)
        fit_ins, phase = method.configure_fit(rnd, sampled), 0
        while fit_ins:   # phase 0, then any further exchanges the method asks for within the round
            results = backend.fit(fit_ins)
            answered = {cid: r for cid, r in results.items() if isinstance(r, FitRes)}
            failed = {cid: r for cid, r in results.items() if isinstance(r, ClientFailure)}
            for cid, f in failed.items():
                _log(f"[fedlab] round {rnd}: client {cid} failed: {f.error}")
            ok, rejected = screen_uploads(rnd, answered, method)
            for cid, why in rejected.items():
                _log(f"[fedlab] round {rnd}: rejected the upload of client {cid}: {why}")
            m["rejected"] = m.get("rejected", 0) + len(rejected)
            if len(ok) < min(cfg.federation.min_clients, len(fit_ins)):
                raise FederationError(f"round {rnd}: only {len(ok)} of {len(fit_ins)} clients gave a usable "
                                      f"answer ({len(failed)} failed, {len(rejected)} rejected); "
                                      f"federation.min_clients={cfg.federation.min_clients}")
            agg = method.aggregate_fit(rnd, ok) if phase == 0 else method.aggregate_phase(rnd, phase, ok)
            if phase == 0:
                m.update({"clients/ok": len(ok), "clients/failed": len(failed)})
            else:
                m["clients/failed"] += len(failed)
            m["bytes/down"] += sum(ins.nbytes() for ins in fit_ins.values())
            m["bytes/up"] += sum(r.nbytes() for r in answered.values())
            for r in ok.values():
                for key, v in r.metrics.items():
                    losses[key].append(v)
                    if key in ("loss/task", "time/fit"):
                        m[f"{key}_client_{r.cid}"] = v
            m.update({f"server/{key}": v for key, v in agg.items()})
            fit_ins, phase = method.next_phase(rnd, phase, ok), phase + 1
        m.update({key: sum(v) / len(v) for key, v in losses.items()})
        m["time/fit_round"] = time.perf_counter() - t0
        if rnd % cfg.eval.every == 0 or rnd == rounds:
            m.update(evaluate(rnd))
        m["time/round"] = time.perf_counter() - t0
        history.rounds.append(m)
        _save_checkpoint(ckpt_path, {"round": rnd, "method": method.state_dict(),
                                     "client_states": backend.get_client_states(), "history": history.rounds,
                                     "py_rng": random.getstate(), "torch_rng": torch.get_rng_state(),
                                     "run_id": tracker.run_id})
        log_round(m)
        if progress:
            acc = m.get("acc/mean")
            _log(f"[fedlab] round {rnd}/{rounds}  acc {acc if acc is None else round(acc, 4)}  "
                 f"task-loss {m.get('loss/task', float('nan')):.4f}  up {m['bytes/up'] / 1e6:.2f} MB  "
                 f"down {m['bytes/down'] / 1e6:.2f} MB  {m['time/round']:.1f}s")
    history.final = {**history.rounds[-1], **method.finalize(backend)}
    history.final["time/total"] = time.perf_counter() - t_run
    backend.shutdown()
    return history
