"""Per-client and per-task summaries of evaluation answers: what every method logs for a round."""
from __future__ import annotations

from collections import defaultdict

from fedlab.comm.messages import EvalRes


def summarize_eval(results: dict) -> dict:
    """Per-client accuracy (mean over its tasks, weighted by test size), per-task accuracy (mean over the
    clients holding the task) and their mean over clients; for generative tasks the same for Rouge-L and
    exact match (`rougeL/client_<id>`, `rougeL_client_<id>/<task>`, `rougeL/task_<task>`, `rougeL/mean`, and
    `em/…`)."""
    out: dict = {}
    per_client, per_task = {}, defaultdict(list)
    gen_client: dict[str, dict[int, float]] = {"rougeL": {}, "em": {}}
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
            # each client's answer share per task: whether this client's model answers one class there
            out.update({f"top_client_{cid}/{k[4:]}": v for k, v in r.metrics.items() if k.startswith("top/")})
        for t, a in accs.items():
            per_task[t].append(a)
        for k, v in r.metrics.items():
            if k.startswith(("rougeL/", "em/", "top/")):
                per_task[k].append(v)
        for metric in gen_client:
            scores = {k.split("/", 1)[1]: v for k, v in r.metrics.items() if k.startswith(metric + "/")}
            if scores:
                n = {t: r.metrics.get(f"n/{t}", 1) for t in scores}
                gen_client[metric][cid] = sum(scores[t] * n[t] for t in scores) / max(1, sum(n.values()))
                out[f"{metric}/client_{cid}"] = gen_client[metric][cid]
                if len(scores) > 1:     # each task too: a claim can leave out a (client's model, task) cell
                    out.update({f"{metric}_client_{cid}/{t}": v for t, v in scores.items()})
    for t, vals in per_task.items():
        name = f"acc/task_{t}" if "/" not in t else f"{t.split('/')[0]}/task_{t.split('/', 1)[1]}"
        out[name] = sum(vals) / len(vals)
    if per_client:
        out["acc/mean"] = sum(per_client.values()) / len(per_client)
    for metric, vals in gen_client.items():
        if vals:
            out[f"{metric}/mean"] = sum(vals.values()) / len(vals)
    return out


def server_summary(results: dict) -> dict:
    """`summarize_eval` of one server-side model scored on every client's tasks, without the per-client
    copies of the same numbers."""
    return {k: v for k, v in summarize_eval(results).items()
            if not k.startswith(("acc/client_", "acc_client_", "top_client_", "rougeL/client_", "em/client_",
                                 "rougeL_client_", "em_client_"))}
