"""Evaluation beside training (`eval.overlap: true`): round t's global model is scored in a second
process while round t + 1 trains, instead of between the two rounds.

Only an evaluation that depends on nothing but its instructions can move. A method says so with
`evaluation_beside = True` (set on the methods that average a global state and have every client score it as
sent): every client scores the state its instruction carries with `LoraClient.evaluate`, and nothing a fit does
changes what a score reads. Methods that evaluate in their own way, send no state, or whose clients write into
their resident models evaluate in line. The clients must run in the driver (`backend.name: inprocess`) and the
machine must have a second core; otherwise the run evaluates in line and says why, once.

The second process builds its own `ClientHost` from the config (the same data and resident models, the same
`backend.threads`), so a score is the one the driver computes in line: the same code on the same inputs. Messages
cross the pipe as pickled bytes (tensors copied, no shared memory). Nothing waits for the second process until the
last round, except that at most two evaluations are in flight (a third waits for the oldest); the last round is
split by task between the two processes, each task scored on its own and the answers put together in the client's
task order, as `LoraClient.evaluate` orders them in line. A checkpoint carries the instructions of the evaluations
not yet merged, and a resumed run scores them in line. If the second process is lost, or fails every client of an
evaluation, what it had not answered is scored in line from the kept instructions.

Cost: a second copy of the scored models' memory and a second core's time (`time/eval_beside`, the second
process's own seconds; `time/eval` is what the driver waited for)."""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import time

from fedlab.runtime.context import log_line

MAX_IN_FLIGHT = 2


def why_not(cfg, method) -> str | None:
    """Why this run cannot evaluate beside training (None: it can)."""
    from fedlab import registry
    from fedlab.methods.client import LoraClient
    from fedlab.runtime.capabilities import capable

    if not capable(cfg, "evaluation_beside"):
        return f"backend.name is {cfg.backend.name!r} (overlap runs beside the in-process backend only)"
    if not getattr(method, "evaluation_beside", False):
        return (f"method {cfg.method.name!r} evaluates what its instructions do not carry (its own evaluation, or "
                "client state), so its scores could differ in a second process")
    client_cls = registry.get(cfg.method.name).client_cls
    if not issubclass(client_cls, LoraClient) or client_cls.evaluate is not LoraClient.evaluate:
        return f"method {cfg.method.name!r}'s clients evaluate in their own way"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2:
        return "this process may use one core only (a second process would take its time from training)"
    return None


def _send(conn, obj) -> None:
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(conn):
    return pickle.loads(conn.recv_bytes())


def _serve(cfg_tree, cids, conn) -> None:
    """The second process: score each (round, instructions, tasks) it is sent and answer (round, answers,
    seconds). `tasks` None: each client's whole evaluation, {cid: EvalRes or error text}; a list: each task on
    its own, {task: {cid: EvalRes or error text}}. Signals are the driver's business: it kills this process."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from fedlab import registry
    from fedlab.config import build_config
    from fedlab.runtime.host import ClientHost

    registry.load_plugins(cfg_tree.get("plugins") or [])
    host = ClientHost(build_config(cfg_tree), list(cids))

    def score(instructions):
        out = {}
        for cid, ins in instructions.items():
            try:
                out[cid] = host.evaluate(cid, ins)
            except Exception as e:   # reported per client, as the in-line evaluation reports it
                out[cid] = f"{type(e).__name__}: {e}"
        return out

    while True:
        try:
            rnd, instructions, tasks = _recv(conn)
        except EOFError:              # the driver is gone
            break
        t0 = time.perf_counter()
        got = score(instructions) if tasks is None else {t: score(asking(instructions, [t])) for t in tasks}
        _send(conn, (rnd, got, time.perf_counter() - t0))


def asking(instructions: dict, tasks: list[str]) -> dict:
    """The instructions restricted to `tasks` (`config["tasks"]`, read by `LoraClient.evaluate`)."""
    import dataclasses

    return {cid: dataclasses.replace(ins, config={**ins.config, "tasks": list(tasks)})
            for cid, ins in instructions.items()}


class BesideEvaluator:
    """The second process and the evaluations sent to it: round → (instructions, tasks), kept until merged so
    that a lost process's work can be scored in line; answers received wait in `inbox` until merged."""

    def __init__(self, cfg, cids: list[int]):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(cfg.to_dict(), cids, child), name="fedlab-evaluator",
                                daemon=True)
        self.proc.start()
        child.close()
        self.pending: dict[int, tuple[dict, list | None]] = {}
        self.inbox: list[tuple[int, dict, float]] = []
        self.lost = False

    def submit(self, rnd: int, instructions: dict, tasks: list[str] | None = None) -> bool:
        """Sends round `rnd`'s evaluation (False, nothing sent, when the process is lost)."""
        self.pending[rnd] = (instructions, tasks)
        if self.lost or not self.proc.is_alive():
            self.lost = True
            return False
        try:
            _send(self.conn, (rnd, instructions, tasks))
        except OSError:
            self.lost = True
            return False
        return True

    def receive(self, wait_until: int | None) -> None:
        """Moves answers into `inbox`: those already sent and, with `wait_until` = n, waits until at most n of
        the pending evaluations are unanswered (0: all). Marks the process lost when it ends or the pipe closes."""
        from multiprocessing.connection import wait

        while not self.lost:
            unanswered = len(self.pending) - len(self.inbox)
            must_wait = wait_until is not None and unanswered > wait_until
            try:
                if not self.conn.poll():
                    if not must_wait:
                        return
                    wait([self.conn, self.proc.sentinel])      # an answer, or the process's end
                    if not self.conn.poll():
                        self.lost = True
                        return
                self.inbox.append(_recv(self.conn))
            except (EOFError, OSError):
                self.lost = True
                return

    def close(self) -> None:
        """Ends the second process: killed rather than left to tear its libraries down (it writes nothing
        after answering; an unanswered evaluation is scored in line or from the checkpoint)."""
        self.proc.kill()
        self.proc.join(timeout=30)
        self.conn.close()


def summarize(rnd: int, got: dict) -> dict:
    """The metrics `FedMethod.evaluate` returns for the answers `got` ({cid: EvalRes or error text}; failed
    clients said on stderr, as `RoundContext.evaluate` does)."""
    from fedlab.comm.messages import EvalRes
    from fedlab.eval.summary import summarize_eval

    ok = {}
    for cid, r in sorted(got.items()):
        if isinstance(r, EvalRes):
            ok[cid] = r
        else:
            log_line(f"[fedlab] round {rnd}: client {cid} failed to evaluate: {r}")
    return summarize_eval(ok)


def all_failed(got: dict) -> bool:
    """Whether every client's answer in `got` (whole, or {task: {cid: …}}) is an error."""
    from fedlab.comm.messages import EvalRes

    flat = [r for v in got.values() for r in (v.values() if isinstance(v, dict) else [v])]
    return bool(flat) and not any(isinstance(r, EvalRes) for r in flat)


def split_tasks(tasks: dict) -> tuple[list[str], list[str]]:
    """The last round's tasks for the second process and for the driver: every other task of the run, in the
    order the clients hold them (([], all) for one task)."""
    order = []
    for names in tasks.values():
        order += [t for t in names if t not in order]
    there, here = order[0::2], order[1::2]
    return (there, here) if here else ([], order)


def joined(per_task: dict, tasks: dict, rnd: int) -> dict:
    """Each client's per-task answers ({task: {cid: EvalRes or error}}) as one answer, its metrics inserted in
    its own task order (`tasks[cid]`), as `LoraClient.evaluate` inserts them in line; a client whose answer for
    one of its tasks failed is reported as failed (with that task's error)."""
    from fedlab.comm.messages import EvalRes

    out = {}
    for cid, names in tasks.items():
        metrics, error = {}, None
        for t in names:
            r = per_task.get(t, {}).get(cid)
            if isinstance(r, EvalRes):
                metrics.update(r.metrics)
            else:
                error = error or (r if isinstance(r, str) else f"no answer for task {t}")
        out[cid] = EvalRes(cid, rnd, metrics) if error is None else error
    return out
