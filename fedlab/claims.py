"""Claims tables: a paper's claim "row a scores above row b" tested on the seeds both rows of a table hold.

For each claim the paired difference d_s = 100·(f(a, s) − f(b, s)) over the common seeds s gives a mean, its
95 % t-interval and the paired t-test (`fedlab.stats.paired_difference`). The verdict:

    reproduced     the interval lies above 0 (a > b, as the paper says)
    contradicted   the interval lies below 0 (b > a)
    inconclusive   the interval covers 0, or fewer than 2 common seeds

A claim "a is comparable to b" (`at_least=True`, e.g. "FedMKT's LLM is comparable to centralized training")
is reproduced when the interval's lower end is above −`tolerance` points (a is at most that much worse, with
95 % confidence), contradicted when its upper end is below −`tolerance`, inconclusive otherwise."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


def per_seed(results, keys: str | tuple[str, ...], fn) -> dict[int, float]:
    """{seed: fn(record)} of one row, or the mean over several rows of the seeds every one of them holds."""
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    by_key = [{rec["seed"]: fn(rec) for rec in results.runs(k)} for k in keys]
    seeds = set.intersection(*(set(s for s, v in d.items() if v is not None) for d in by_key))
    return {s: sum(d[s] for d in by_key) / len(by_key) for s in seeds}


def check_claim(results, c: Claim) -> tuple[str, str]:
    """(ours, verdict) of one claim on `results` (a `fedlab.runner.Results`)."""
    from fedlab.stats import paired_difference

    keys = [k for side in (c.a, c.b) for k in ((side,) if isinstance(side, str) else side)]
    if not all(results.runs(k) for k in keys):
        return "-", "not run yet"
    xa, xb = per_seed(results, c.a, c.fn), per_seed(results, c.b, c.fn_b or c.fn)
    seeds = sorted(set(xa) & set(xb))
    if len(seeds) < 2:
        return "-", f"inconclusive ({len(seeds)} common seed)"
    d = paired_difference([100 * xa[s] for s in seeds], [100 * xb[s] for s in seeds])
    ours = f"{d['mean']:+.1f} ± {d['half']:.1f} pts ({len(seeds)} seeds)"
    if c.at_least:
        if d["mean"] - d["half"] >= -c.tolerance:
            return ours, "reproduced"
        return ours, "contradicted" if d["mean"] + d["half"] < -c.tolerance else "inconclusive"
    if d["significant"] and d["mean"] < 0:
        return ours, "contradicted"
    if d["significant"] and d["mean"] > 0:
        return ours, "reproduced"
    return ours, "inconclusive"


def claims_table(results, claims: list[Claim]) -> list[str]:
    """Markdown lines: claim · paper's table · paper's number · ours (a − b, mean ± 95 %) · verdict."""
    out = ["| claim | paper | paper's number | ours (a − b) | verdict |", "|---|---|---|---|---|"]
    for c in claims:
        ours, verdict = check_claim(results, c)
        out.append(f"| {c.claim} | {c.source} | {c.paper} | {ours} | {verdict} |")
    return out


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
