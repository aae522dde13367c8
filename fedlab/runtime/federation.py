"""The federation loop. It knows nothing of Ray and nothing of any method: each round it hands the method a
`RoundContext` (its door to the clients), lets the method run its round, evaluates on evaluation rounds,
checkpoints and records. `resume=true` continues a killed run where its last checkpoint left it."""
from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fedlab import interrupt
from fedlab.config import to_yaml
from fedlab.files import write_atomic
from fedlab.runtime import cost
from fedlab.runtime.context import FederationError, RoundContext, log_line
from fedlab.runtime.evaluation import Evaluation, RunLog, _logged_round  # noqa: F401 (re-exported)
from fedlab.runtime.heartbeat import Heartbeat
from fedlab.runtime.resident import clear_residents

__all__ = ["FederationError", "History", "run_dir", "run_federation", "run_key"]


@dataclass
class History:
    rounds: list[dict] = field(default_factory=list)   # one metrics dict per evaluated round (round 0 = zero-shot)
    final: dict = field(default_factory=dict)
    run_id: str | None = None
    experiment_id: str | None = None
    out_dir: str | None = None
    columns: tuple = ()          # the method's extra table columns (FedMethod.table_columns)
    headline: str = "acc/mean"   # the method's headline metric (FedMethod.headline)
    backend: dict = field(default_factory=dict)   # where the clients ran: workers, nodes
    models: dict = field(default_factory=dict)    # model name -> what identifies its weights (zoo recipe, sha256)
    environment: dict = field(default_factory=dict)   # numerics, libraries, source (fedlab.evidence.provenance)
    diff: str = ""               # the uncommitted changes the run was made with ('' from a clean tree)

    def metric(self, name: str) -> list[tuple[int, float]]:
        return [(r["round"], r[name]) for r in self.rounds if name in r]


def run_key(cfg) -> str:
    """The run's identity (its folder name and the key a table record is checked against): a hash of the
    config's non-default fields (`ExperimentConfig.identity`), without resume and the run's display name."""
    d = cfg.identity()
    d.pop("resume", None)
    d.get("tracking", {}).pop("run_name", None)
    d.get("eval", {}).pop("cache", None)     # where scores come from, not what they are
    d.get("eval", {}).pop("overlap", None)   # when scores are computed, not what they are
    for k in ("target", "target_metric", "target_reference"):    # what the run is measured against, not the run
        d.get("eval", {}).pop(k, None)
    if d.get("eval") == {}:
        d.pop("eval")
    if not d.get("plugins"):
        d.pop("plugins", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_dir(cfg) -> Path:
    return Path(cfg.output_dir) / f"{cfg.method.name}-{run_key(cfg)}"


def _save_checkpoint(path: Path, payload: dict) -> None:
    """Write the round's checkpoint atomically; the previous round's stays beside it (`checkpoint.prev.pt`)
    for a resume to fall back to if the newest one is damaged."""
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    if path.exists():
        path.replace(previous_checkpoint(path))
    tmp.replace(path)


def previous_checkpoint(path: Path) -> Path:
    return path.with_name(path.stem + ".prev" + path.suffix)


def load_checkpoint(path: Path) -> dict:
    """The newest readable checkpoint: `path`, else the previous round's (said on stderr); one line naming
    the file when neither can be read."""
    from fedlab.validation import ConfigError

    problems = []
    for candidate in (path, previous_checkpoint(path)):
        if not candidate.exists():
            continue
        try:
            ck = torch.load(candidate, weights_only=False)
            if not isinstance(ck, dict) or "round" not in ck:
                raise ValueError("not a fedlab checkpoint")
        except Exception as e:  # truncated, corrupt or foreign: try the previous round's
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            problems.append(f"{candidate} is unreadable ({why})")
            continue
        if problems:
            log_line(f"[fedlab] {problems[0]}; resuming from the previous round's checkpoint {candidate}")
        return ck
    raise ConfigError(f"resume: {'; '.join(problems)}; no earlier checkpoint to fall back to — delete "
                      f"{path.parent} to start the run over")


def _progress(method, m: dict, rounds: int, seconds: float) -> str:
    """One line per round: the method's progress metrics (those this round has), bytes each way, time."""
    shown = [f"{label} {m[key]:.4f}" for label, key in method.progress_metrics.items() if m.get(key) is not None]
    return "  ".join([f"[fedlab] round {m['round']}/{rounds}", *shown,
                      f"up {m.get('bytes/up', 0) / 1e6:.2f} MB", f"down {m.get('bytes/down', 0) / 1e6:.2f} MB",
                      f"{seconds:.1f}s"])


TIME_PARTS = (("clients", "client fits"), ("server", "server (aggregation, the method's server steps)"),
              ("eval", "evaluation"), ("bookkeeping", "checkpoints and logging"))


def time_split(rounds: list[dict], logging_s: float = 0.0, end_models_s: float = 0.0) -> dict:
    """Where a run's time went, summed over its rounds (round 0: the zero-shot evaluation, and the method's start
    as client fits and server time): `time/total_<part>` seconds for each of TIME_PARTS. A round's
    `time/bookkeeping` is its checkpoint, written before the round is logged; `logging_s` (the seconds the rounds'
    records took to reach the tracker, in this process: a resumed run's earlier logging is not kept) goes into the
    total's bookkeeping, and `end_models_s` (the method's end-of-run models, built and scored) into its
    evaluation. Left out: the method's set-up (before the rounds' clock starts) and the end-of-run metrics'
    own logging."""
    split = {f"time/total_{k}": sum(r.get(f"time/{k}", 0.0) for r in rounds) for k, _ in TIME_PARTS}
    split["time/total_bookkeeping"] += logging_s
    split["time/total_eval"] += end_models_s
    return split


def format_time_split(final: dict) -> str | None:
    """One line: each part's seconds and share of their sum (None when the run has no split)."""
    parts = [(label, final.get(f"time/total_{k}")) for k, label in TIME_PARTS]
    if any(v is None for _, v in parts):
        return None
    total = sum(v for _, v in parts) or 1.0
    return "time: " + " · ".join(f"{label} {v:.1f}s ({100 * v / total:.0f} %)" for label, v in parts)


def _open_run_dir(cfg, tracker) -> Path:
    """The run's folder, with its config and (so that a run killed at once is continued, not duplicated) its
    MLflow run id."""
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(to_yaml(cfg))
    if tracker.run_id:
        write_atomic(out / "mlflow_run_id", tracker.run_id)
    return out


def _resume(cfg, method, backend, history, log, evaluation, ckpt_path: Path) -> int:
    """With `resume=true` and a checkpoint: the method, the clients and the RNGs as they were after its round,
    the rounds before it logged where they were not yet, and evaluations left beside training scored here.
    Returns the last round done (0: a fresh run)."""
    if not cfg.resume or not (ckpt_path.exists() or previous_checkpoint(ckpt_path).exists()):
        return 0
    ck = load_checkpoint(ckpt_path)
    method.load_state_dict(ck["method"])
    backend.set_client_states(ck["client_states"])
    history.rounds = ck["history"]
    random.setstate(ck["py_rng"])
    if "torch_rng" in ck:
        torch.set_rng_state(ck["torch_rng"])
    for past in history.rounds:      # rounds checkpointed but killed before they were logged
        log.round(past)
    log_line(f"[fedlab] resuming {ckpt_path.parent} after round {ck['round']}")
    evaluation.resumed(ck.get("pending_eval", {}))
    return ck["round"]


def _checkpoint(path: Path, rnd: int, method, backend, history, tracker, evaluation) -> None:
    _save_checkpoint(path, {"round": rnd, "method": method.state_dict(), "client_states": backend.get_client_states(),
                            "history": history.rounds, "py_rng": random.getstate(), "torch_rng": torch.get_rng_state(),
                            "run_id": tracker.run_id,
                            # evaluations still beside training: scored on resume if the run dies
                            "pending_eval": evaluation.pending()})


def _train_round(rnd: int, ctx, method, evaluation, cfg, rounds: int, budget,
                 beat: Heartbeat | None = None) -> tuple[dict, str | None]:
    """One round: the method's round, its metrics and time split, and its evaluation when due; (record, why the
    run stops after it: the method's stopping rule or the communication budget; None: it goes on). `beat`: the
    round's progress lines, told when training gives way to evaluation."""
    t0 = time.perf_counter()
    ctx.log({"bytes/down": 0, "bytes/up": 0})
    method.run_round(rnd, ctx)
    m = {"round": rnd, **ctx.round_metrics()}
    stop = ("the method's stopping rule was met" if method.should_stop(rnd)
            else budget.stop_after(m) if rnd < rounds else None)
    m["time/fit_round"] = time.perf_counter() - t0
    m["time/clients"] = ctx.client_s
    m["time/server"] = m["time/fit_round"] - ctx.client_s
    last = rnd == rounds or stop
    due = rnd % cfg.eval.every == 0 or last
    t_eval = time.perf_counter()
    evaluation.arrived()
    if due:
        if beat is not None:
            beat.phase("evaluating")
        m.update(evaluation.score(rnd, ctx, last))
    if due or evaluation.beside is not None:
        m["time/eval"] = time.perf_counter() - t_eval
    m["time/round"] = time.perf_counter() - t0        # training and evaluation; bookkeeping is added after
    return m, stop


def _finish(cfg, method, context, tracker, history, rounds: int, t_run: float, reference=None,
            logging_s: float = 0.0, tail_s: float = 0.0) -> None:
    """The method's end-of-run metrics (fused or routed models) at the last round, the final record and the
    run's time split (`logging_s`: the seconds the rounds' records took to log, from `RunLog.seconds`; `tail_s`:
    the wait for the evaluations scored beside training, counted as evaluation with the end-of-run models)."""
    t_end = time.perf_counter()
    end = method.finalize(context(rounds))
    end_models_s = tail_s + time.perf_counter() - t_end
    numbers = {k: v for k, v in end.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if numbers:
        tracker.log_metrics(numbers, step=rounds)
    words = {f"fedlab.final.{k}": str(v) for k, v in end.items() if k not in numbers}
    if words:
        tracker.set_tags(words)
    history.final = {**history.rounds[-1], **end}
    history.final["time/total"] = time.perf_counter() - t_run
    split = time_split(history.rounds, logging_s, end_models_s)
    history.final.update(split)
    tracker.log_metrics(split, step=rounds)
    costs = cost.run_costs(cfg, history.rounds, method.headline, reference)
    history.final.update(costs)
    if costs:
        tracker.log_metrics(costs, step=rounds)


def run_federation(method, backend, cfg, tracker=None, progress: bool = True,
                   target_reference: float | None = None) -> History:
    """The run: rounds until `federation.rounds`, the method's stopping rule or the communication budget; its
    history. `target_reference`: the final value of `eval.target_reference`'s run (read by the caller)."""
    from fedlab.tracking import NullTracker

    tracker = tracker or NullTracker()
    out = _open_run_dir(cfg, tracker)
    ckpt_path = out / "checkpoint.pt"
    history = History(run_id=tracker.run_id, experiment_id=tracker.experiment_id, out_dir=str(out),
                      columns=tuple(method.table_columns), headline=method.headline)
    log = RunLog(cfg, tracker, out, history)
    num_clients = method.data.num_clients
    rounds = cfg.federation.rounds if method.trains else 0
    torch.set_num_threads(cfg.backend.threads)  # server-side compute too: same numbers on every backend
    # residents of an earlier run in this process may carry what that run wrote into their base weights
    # (a server-side re-alignment sent to the clients): every run starts from freshly built ones
    clear_residents()
    context = lambda rnd: RoundContext(rnd, backend, cfg, num_clients, method, tracker, out)  # noqa: E731
    evaluation = Evaluation(cfg, method, context, log, rounds, progress)
    beat = Heartbeat(rounds, progress)
    budget = cost.Budget(cfg, history)
    completed = 0                       # the last round whose checkpoint is written (0: none yet)
    try:        # whatever fails or stops the run, no second process is left behind (except below)
        evaluation.start(num_clients)
        backend.start(cfg, num_clients)
        history.backend = backend.describe()
        tracker.set_tags({f"fedlab.backend.{k}": v for k, v in history.backend.items()})
        method.setup()
        completed = _resume(cfg, method, backend, history, log, evaluation, ckpt_path)
        t_run, logged_before = time.perf_counter(), log.seconds    # a resume's catching up is before the clock
        if completed == 0:                                     # zero-shot, and the method's start
            t0 = time.perf_counter()
            ctx = context(0)
            with beat.round(0, "evaluating (zero-shot)"):
                m = {"round": 0, **evaluation.score(0, ctx, last=rounds == 0)}
                m["time/eval"] = time.perf_counter() - t0
                if method.trains:
                    beat.phase("the method's start")
                    t_begin, fits = time.perf_counter(), ctx.client_s
                    method.begin(ctx)                   # warm-up fits, a model scored, artifacts written
                    m["time/clients"] = ctx.client_s - fits
                    m["time/server"] = time.perf_counter() - t_begin - m["time/clients"]
            m.update(ctx.round_metrics())
            history.rounds.append(m)
            log.round(m)
            if progress:
                log_line(_progress(method, m, rounds, time.perf_counter() - t0) + "  (zero-shot)")
            interrupt.check("before round 1 completed")
        for rnd in range(completed + 1, rounds + 1):
            with beat.round(rnd, "training"):
                m, stop = _train_round(rnd, context(rnd), method, evaluation, cfg, rounds, budget, beat)
            t_book = time.perf_counter()
            history.rounds.append(m)
            _checkpoint(ckpt_path, rnd, method, backend, history, tracker, evaluation)
            completed = rnd
            m["time/bookkeeping"] = time.perf_counter() - t_book     # checkpoint (its own record lacks this key)
            log.round(m)
            if progress:
                log_line(_progress(method, m, rounds, m["time/round"]))
            interrupt.stop_point(rnd)       # a stop asked for by SIGINT / SIGTERM: here, the round checkpointed
            if stop:
                log_line(f"[fedlab] stopped after round {rnd} of {rounds}: {stop}")
                tracker.set_tags({"fedlab.stopped": stop})
                break
        t_tail = time.perf_counter()
        with beat.round(rounds, "waiting for the evaluations scored beside training"):
            evaluation.finish()
        tail_s = time.perf_counter() - t_tail
    except BaseException as e:
        evaluation.off()
        if isinstance(e, interrupt.Interrupted) and e.after_round is None and completed > 0:
            e.after_round = completed       # a second signal cut a round short: the last checkpoint stands
        raise
    with beat.round(rounds, "the method's end-of-run models"):
        _finish(cfg, method, context, tracker, history, rounds, t_run, target_reference,
                log.seconds - logged_before, tail_s)
    backend.shutdown()
    return history
