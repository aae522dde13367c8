"""ELSA's trust step in RESULTS.md: the mislabelled clients it excludes and the terms of its score."""
from __future__ import annotations

from fedlab.evidence.runner import Results

from elsa_rows import ALPHAS, TASKS, WARMUPS, indomain_trust_rows


def mislabel_section(r: Results) -> list[str]:
    """The trust step against the clients whose labels were flipped (data.mislabeled_clients): precision and
    recall of its exclusions, and recall@m (the m lowest-trust clients, m = the number mislabelled)."""
    def row(setting: str, alpha: str, key: str) -> str:
        trust = lambda m: r.values(key, lambda rec: (rec.get("summary") or {}).get("trust", {}).get(m))
        cell = lambda m: r.cell(key, lambda rec: (rec.get("summary") or {}).get("trust", {}).get(m), 2)
        return (f"| {setting} | {alpha} | {cell('server/trust/flagged')} | {cell('server/trust/precision')} "
                f"({len(trust('server/trust/precision'))} of {len(r.runs(key))}) | "
                f"{cell('server/trust/recall')} | {cell('server/trust/recall_at_m')} | "
                f"{cell('server/trust/auc_low')} | {cell('server/trust/spearman_entropy')} |")

    out = [row(task, alpha, f"t1/{task}/a{alpha}/elsa") for task in TASKS for alpha in ALPHAS
           if r.runs(f"t1/{task}/a{alpha}/elsa")]
    out += [row(f"topic, {w} warm-up steps, no training", "0.1", f"trust/topic/w{w}") for w in WARMUPS
            if r.runs(f"trust/topic/w{w}")]
    out += [row(f"topic, {w} warm-up steps, no training (positive control)", "iid", f"trust/topic/iid/w{w}")
            for w in WARMUPS if r.runs(f"trust/topic/iid/w{w}")]
    for _, what, part, w, key in indomain_trust_rows():
        if r.runs(key):
            out.append(row(f"topic, in-domain probes (Q = 256), fingerprint of {what}, {w} warm-up steps"
                           + (" (positive control)" if part == "iid" else ""), "iid" if part == "iid" else "0.1", key))
    if not out:
        return []
    return ["", "## Mislabelled clients found by trust (ELSA rows; 4 of 20 clients with half their labels flipped)", "",
            "Spearman: the rank correlation of the clients' trust with their label entropy (does trust rank clients "
            "by how mixed their classes are?). On the iid rows only the flipped labels set clients apart: there "
            "recall@4 = 1 is the positive control. AUC: the probability that a mislabeled client's trust is below a "
            "clean client's (chance 0.5; 1: every mislabeled client below every clean one).", "",
            "| task | α̂ | clients excluded for low trust | exclusion precision (seeds that excluded any) | exclusion recall "
            "| recall@4 (lowest trust) | AUC (mislabeled below clean) | Spearman(trust, label entropy) |",
            "|---|---|---|---|---|---|---|---|",
            *out]


def trust_terms_section(r: Results) -> list[str]:
    """Which term of log w_n = −c_n − mean R̂ ranks the mislabelled clients low, on the in-domain trust rows whose
    records log each term's own ranking (`trust/recall_at_m_<term>`, `trust/auc_low_<term>`): recall@4, AUC and
    the seeds in which all 4 are the 4 lowest (the positive control as the ELSA README words it), for the
    trust and for each term alone."""
    trust = lambda rec: (rec.get("summary") or {}).get("trust", {})
    with_terms = lambda rec: "server/trust/auc_low_confidence" in trust(rec)

    def cells(key: str, suffix: str) -> str:    # over the seeds whose records log the terms, for every column
        get = lambda m: lambda rec: trust(rec).get(f"server/trust/{m}{suffix}") if with_terms(rec) else None
        at_m = r.values(key, get("recall_at_m"))
        return (f"{r.cell(key, get('recall_at_m'), 2)} | {r.cell(key, get('auc_low'), 2)} | "
                f"{sum(v == 1.0 for v in at_m)} of {len(at_m)}")

    out = []
    for _, what, part, w, key in indomain_trust_rows():
        if any(with_terms(rec) for rec in r.runs(key)):
            out.append(f"| {'iid' if part == 'iid' else 'α̂ = 0.1'} | {what} | {w} | {cells(key, '')} | "
                       f"{cells(key, '_confidence')} | {cells(key, '_divergence')} |")
    if not out:
        return []
    return ["", "## Which term of the trust ranks the mislabelled clients low (in-domain probes, Q = 256)", "",
            "log w_n = −c_n − mean R̂(n, ·): c_n is the confidence term (mean 1/‖T‖ for the head's input, the mean "
            "prediction entropy for its log-probabilities), mean R̂ the divergence term. Each block: recall@4, AUC "
            "(mislabeled below clean) and the seeds in which the 4 mislabelled clients are the 4 lowest (on iid "
            "splits, the positive control).", "",
            "| split | fingerprint | warm-up steps | trust: recall@4 | AUC | all 4 lowest | confidence term alone: "
            "recall@4 | AUC | all 4 lowest | divergence term alone: recall@4 | AUC | all 4 lowest |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|", *out]
