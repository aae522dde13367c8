"""Evaluation beside training (`eval.overlap: true`, issue 33): round t's global model is scored in a second
process while round t + 1 trains, instead of between the two rounds.

Only an evaluation that depends on nothing but its instructions can move: the method keeps `FedMethod.evaluate`
(every client scores the model `configure_evaluate` names), every instruction carries the state to score, the
clients evaluate with `LoraClient.evaluate`, and the clients run in the driver (`backend.name: inprocess`).
Otherwise the run evaluates in line and says why once.

The second process builds its own `ClientHost` from the config (the same data and resident models, the same
`backend.threads`), so a score is the one the driver would compute: the same code on the same inputs. It starts
before the driver builds its models, so its start-up runs beside the driver's. Nothing waits for it until the
last round: then half of the run's tasks are scored there and half in the driver at the same time, and the
driver waits for both (`time/eval`, the critical path; the second process's own time is `time/eval_beside`).
A checkpoint carries the instructions of the evaluations still beside training, and a resumed run scores them
in line. The second process costs a second copy of the scored models' memory and a second core."""
from __future__ import annotations

import multiprocessing as mp
import time

from fedlab.runtime.context import log_line


def why_not(cfg, method) -> str | None:
    """Why this run cannot evaluate beside training (None: it can)."""
    from fedlab import registry
    from fedlab.methods.base import FedMethod
    from fedlab.methods.client import LoraClient

    if cfg.backend.name != "inprocess":
        return f"backend.name is {cfg.backend.name!r} (overlap runs beside the in-process backend only)"
    if type(method).evaluate is not FedMethod.evaluate:
        return f"method {cfg.method.name!r} evaluates in its own way (its evaluate reads the server's state)"
    client_cls = registry.get(cfg.method.name).client_cls
    if not issubclass(client_cls, LoraClient) or client_cls.evaluate is not LoraClient.evaluate:
        return f"method {cfg.method.name!r}'s clients evaluate in their own way"
    return None


def _serve(cfg, cids, conn) -> None:
    """The second process: score each (round, instructions) it is sent, answer (round, results, seconds)."""
    from fedlab.comm.messages import EvalRes
    from fedlab.runtime.host import ClientHost

    host = ClientHost(cfg, list(cids))
    conn.send("ready")
    while True:
        try:
            rnd, instructions = conn.recv()
        except EOFError:              # the driver is gone
            break
        t0 = time.perf_counter()
        out = {}
        for cid, ins in instructions.items():
            try:
                out[cid] = host.evaluate(cid, ins)
            except Exception as e:   # reported per client, as the in-line evaluation reports it
                out[cid] = f"{type(e).__name__}: {e}"
        conn.send((rnd, {c: r if isinstance(r, EvalRes) else str(r) for c, r in out.items()},
                   time.perf_counter() - t0))
    conn.close()


class BesideEvaluator:
    """The second process and the evaluations sent to it (round → instructions, kept until answered so that
    a lost process's work can be redone in line)."""

    def __init__(self, cfg, cids: list[int]):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(cfg, cids, child), name="fedlab-evaluator", daemon=True)
        self.proc.start()
        child.close()
        self.pending: dict[int, dict] = {}

    def submit(self, rnd: int, instructions: dict) -> None:
        self.pending[rnd] = instructions
        self.conn.send((rnd, instructions))

    def results(self, block: bool) -> list[tuple[int, dict, float]]:
        """Answers received so far ((round, {cid: EvalRes or error text}, seconds) in round order); with
        `block`, waits until every submitted round is answered. A lost process raises `EOFError` (the rounds
        still pending are in `pending`)."""
        out = []
        while self.pending and (block or self.conn.poll()):
            msg = self.conn.recv()
            if msg == "ready":
                continue
            rnd, got, seconds = msg
            self.pending.pop(rnd, None)
            out.append((rnd, got, seconds))
        return out

    def close(self) -> None:
        """Ends the second process. Every answer it sent is in, and it writes nothing after answering: it is
        killed rather than left to tear its libraries down (a second of the run's wall time)."""
        self.proc.kill()
        self.proc.join(timeout=30)
        self.conn.close()


def summarize(rnd: int, got: dict) -> dict:
    """The metrics `FedMethod.evaluate` returns for the answers `got` (failed clients said on stderr, as
    `RoundContext.evaluate` does)."""
    from fedlab.comm.messages import EvalRes
    from fedlab.eval.summary import summarize_eval

    ok = {}
    for cid, r in sorted(got.items()):
        if isinstance(r, EvalRes):
            ok[cid] = r
        else:
            log_line(f"[fedlab] round {rnd}: client {cid} failed to evaluate: {r}")
    return summarize_eval(ok)


def halves(instructions: dict, tasks: dict) -> tuple[dict, dict]:
    """The last round's evaluation split between the two processes by task: every other task of the run (in
    the order the clients hold them) goes to the second process, the rest stays; each client is asked for its
    tasks in each half (`config["tasks"]`, read by `LoraClient.evaluate`). ({}, instructions) for one task."""
    import dataclasses

    order = []
    for cid in instructions:
        order += [t for t in tasks[cid] if t not in order]
    there, here = order[0::2], order[1::2]
    if not here:
        return {}, instructions

    def asking(names):
        return {cid: dataclasses.replace(ins, config={**ins.config, "tasks": list(names)})
                for cid, ins in instructions.items()}

    return asking(there), asking(here)


def joined(mine: dict, theirs: dict) -> dict:
    """Each client's two halves as one answer (its metrics of both); a client that failed either half is
    reported as failed."""
    from fedlab.comm.messages import EvalRes

    out = {}
    for cid in sorted(set(mine) | set(theirs)):
        a, b = mine.get(cid), theirs.get(cid)
        if isinstance(a, EvalRes) and isinstance(b, EvalRes):
            out[cid] = EvalRes(cid, a.round, {**a.metrics, **b.metrics})
        else:
            out[cid] = b if isinstance(b, str) else "no answer for half of its tasks"
    return out
