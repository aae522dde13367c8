"""Claims tables: a paper's claim "row a scores above row b" tested on the seeds both rows of a table hold.

For each claim the paired difference d_s = 100·(f(a, s) − f(b, s)) over the common seeds s gives a mean, its
95 % t-interval and the paired t-test (`fedlab.evidence.stats.paired_difference`). The verdict:

    reproduced     the interval lies above 0 (a > b, as the paper says)
    contradicted   the interval lies below 0 (b > a)
    inconclusive   the interval covers 0
    too few seeds  fewer than MIN_SEEDS (3) common seeds: the difference and its interval are shown, no verdict
                   (at 2 seeds one seed can carry the interval, and a fifth seed has overturned a 4-seed reading)
    no verdict     a row's records were made by another config than the one the script runs now
                   (`Results.outdated`; a table marks such cells †): the difference is shown, no verdict until the
                   row is re-run. Records stale only by numerics (another CPU kind) or weights keep their verdict

    underpowered   the interval covers 0 and the paper's effect is smaller than the MDE: these seeds could not
                   have detected it, so its absence says nothing
    inconclusive   the interval covers 0 while the seeds could have detected the paper's effect; the verdict
                   names the effects the interval excludes (a paper effect among them is ruled out)

Beside each verdict stands the minimum detectable effect (MDE): the true difference a paired t-test on these
seeds finds with 80 % power at two-sided α = 0.05, from the paired differences' spread
(`fedlab.evidence.stats.mde_paired`). The paper's effect is the signed number in parentheses of `paper`
("61.2 vs 58.9 (+2.3)"), or `effect`.

A claim "a is comparable to b" (`at_least=True`, e.g. "FedMKT's LLM is comparable to centralized training")
is reproduced when the interval's lower end is above −`tolerance` points (a is at most that much worse, with
95 % confidence), contradicted when its upper end is below −`tolerance`, inconclusive otherwise
(underpowered when the interval is wider than the tolerance on either side: then no outcome could show it)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MIN_SEEDS = 3                                   # the fewest common seeds a verdict is given on

BEGIN, END = "<!-- claims: written by make_tables.py -->", "<!-- /claims -->"


@dataclass(frozen=True)
class Claim:
    claim: str                                  # what the paper says, in words
    source: str                                 # "Table 3"
    paper: str                                  # the paper's numbers, e.g. "61.2 vs 58.9 (+2.3)"
    a: str | tuple[str, ...]                    # row key claimed higher (several: their mean per seed)
    b: str | tuple[str, ...]                    # row key claimed lower
    fn: Callable[[dict], float | None]          # record → accuracy in [0, 1]
    fn_b: Callable[[dict], float | None] | None = None   # for b when it differs (e.g. round 0 of the same run)
    at_least: bool = False                      # a comparable to b: not more than `tolerance` points below
    tolerance: float = 2.0
    effect: float | None = None                 # the paper's a − b in points (default: read from `paper`)

    def paper_effect(self) -> float | None:
        if self.effect is not None:
            return self.effect
        m = re.search(r"\(([+\-−]?\d+(?:\.\d+)?)\)", self.paper)
        return float(m.group(1).replace("−", "-")) if m else None


def per_seed(results, keys: str | tuple[str, ...], fn) -> dict[int, float]:
    """{seed: fn(record)} of one row, or the mean over several rows of the seeds every one of them holds."""
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    by_key = [{rec["seed"]: fn(rec) for rec in results.runs(k)} for k in keys]
    seeds = set.intersection(*(set(s for s, v in d.items() if v is not None) for d in by_key))
    return {s: sum(d[s] for d in by_key) / len(by_key) for s in seeds}


NO_VERDICT = "no verdict: records made by another config than the script's (re-run the row)"


def claim_keys(c: Claim) -> list[str]:
    """Every row key a claim reads (both sides)."""
    return [k for side in (c.a, c.b) for k in ((side,) if isinstance(side, str) else side)]


def assess(results, c: Claim, outdated: frozenset[str] | set[str] = frozenset()) -> dict:
    """The claim on `results` (a `fedlab.evidence.records.Results`): {"ours", "mde", "verdict"} as table cells, and the
    paired difference ("diff", None when it cannot be computed). A claim reading a row in `outdated` (keys whose
    records another config made, `Results.outdated`) shows its difference without a verdict."""
    from fedlab.evidence.stats import paired_difference

    keys = claim_keys(c)
    if not all(results.runs(k) for k in keys):
        return {"ours": "-", "mde": "-", "verdict": "not run yet", "diff": None}
    xa, xb = per_seed(results, c.a, c.fn), per_seed(results, c.b, c.fn_b or c.fn)
    seeds = sorted(set(xa) & set(xb))
    if len(seeds) < 2:
        return {"ours": "-", "mde": "-", "verdict": f"too few seeds ({len(seeds)}; a verdict needs {MIN_SEEDS})",
                "diff": None}
    d = paired_difference([100 * xa[s] for s in seeds], [100 * xb[s] for s in seeds])
    lo, hi = d["mean"] - d["half"], d["mean"] + d["half"]
    out = {"ours": f"{d['mean']:+.1f} ± {d['half']:.1f} pts ({len(seeds)} seeds)", "mde": f"{d['mde']:.1f} pts",
           "diff": d}
    if any(k in outdated for k in keys):
        return {**out, "verdict": NO_VERDICT}
    if len(seeds) < MIN_SEEDS:
        return {**out, "verdict": f"too few seeds ({len(seeds)}; a verdict needs {MIN_SEEDS})"}
    if c.at_least:
        if lo >= -c.tolerance:
            verdict = "reproduced"
        elif hi < -c.tolerance:
            verdict = "contradicted"
        elif d["half"] > c.tolerance:
            verdict = f"underpowered (interval ± {d['half']:.1f} wider than the tolerance {c.tolerance:g})"
        else:
            verdict = "inconclusive"
        return {**out, "verdict": verdict}
    if d["significant"]:
        return {**out, "verdict": "reproduced" if d["mean"] > 0 else "contradicted"}
    paper = c.paper_effect()
    if paper is not None and abs(paper) < d["mde"]:
        return {**out, "verdict": f"underpowered (paper {paper:+.1f} < MDE {d['mde']:.1f})"}
    excluded = f"excludes < {lo:+.1f} and > {hi:+.1f}"
    if paper is not None and not lo <= paper <= hi:
        excluded += f": the paper's {paper:+.1f} is ruled out"
    return {**out, "verdict": f"inconclusive ({excluded})"}


def check_claim(results, c: Claim) -> tuple[str, str]:
    """(ours, verdict) of one claim on `results` (a `fedlab.evidence.records.Results`)."""
    a = assess(results, c)
    return a["ours"], a["verdict"]


def claims_table(results, claims: list[Claim], outdated: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Markdown lines: claim · paper's table · paper's number · ours (a − b, mean ± 95 %) · MDE · verdict (none
    for a claim on a row in `outdated`)."""
    out = ["| claim | paper | paper's number | ours (a − b) | MDE (80 % power) | verdict |", "|---|---|---|---|---|---|"]
    for c in claims:
        a = assess(results, c, outdated)
        out.append(f"| {c.claim} | {c.source} | {c.paper} | {a['ours']} | {a['mde']} | {a['verdict']} |")
    out.append("")
    out.append("MDE: the smallest true difference these seeds detect with 80 % power (paired t-test, two-sided "
               "α = 0.05). *underpowered*: the paper's effect is below it, so not finding it says nothing; "
               "*inconclusive*: the seeds could have found the paper's effect, and the interval says which effects "
               f"it excludes; *too few seeds*: fewer than {MIN_SEEDS} common seeds, no verdict; *no verdict*: a "
               "row's records were made by another config than the script runs now.")
    return out


def differences_table(results, pairs, digits: int = 3, scale: float = 1.0,
                      outdated: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Markdown lines of paired differences over seeds, one row per (name, row a, metric a, row b, metric b) that
    has two or more common seeds: mean ± 95 % half-width, seeds, the MDE (80 % power, paired t-test, two-sided
    α = 0.05), the p-value and whether the interval excludes 0 (below MIN_SEEDS common seeds: "too few seeds",
    as for a claim's verdict; a row in `outdated`: "no verdict (another config)"); [] when no pair has records."""
    out = []
    for name, a, ma, b, mb in pairs:
        d = results.paired(a, ma, b, mb, scale=scale)
        if d is None:
            continue
        significant = ("no verdict (another config)" if a in outdated or b in outdated else "too few seeds" if d["seeds"] < MIN_SEEDS
                       else "yes" if d["significant"] else "no")
        out.append(f"| {name} | {d['mean']:+.{digits}f} ± {d['half']:.{digits}f} | {d['seeds']} | "
                   f"{d['mde']:.{digits}f} | {d['p']:.3g} | {significant} |")
    if not out:
        return []
    return ["| difference | mean ± 95 % | seeds | MDE (80 % power) | p (paired t) | significant |",
            "|---|---|---|---|---|---|", *out]


def write_block(readme: Path, lines: list[str]) -> None:
    """Replace the README's claims block (between BEGIN and END) with `lines`; append the block when the
    README has none."""
    readme = Path(readme)
    text = readme.read_text() if readme.exists() else ""
    block = "\n".join([BEGIN, *lines, END])
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text)
