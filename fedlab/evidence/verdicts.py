"""The one vocabulary every results page uses for a paper's claim, with the rule that gives each word.

A claim "a above b" is tested on the paired differences d_s = 100·(f(a, s) − f(b, s)) over the seeds both rows
hold: their mean, its 95 % t-interval [lo, hi] and the minimum detectable effect (MDE, `stats.mde_paired`). With
the paper's effect p (its a − b in points), the verdict is, in this order:

    stale          a row's records were made by another config than the table script runs now
    too few seeds  fewer than MIN_SEEDS common seeds
    no control     the control the claim rests on fails (a row of it does not learn a task in some seed)
    reproduced     the interval excludes 0 on the paper's side and holds p
    smaller        the interval excludes 0 on the paper's side, and p lies beyond it (the effect is smaller)
    larger         the interval excludes 0 on the paper's side, and p lies between 0 and it (larger)
    contradicted   the interval excludes 0 on the other side
    underpowered   the interval holds 0 and |p| is below the MDE: these seeds could not have found p
    inconclusive   the interval holds 0 while the seeds could have found p; it names the effects it excludes

Without a paper number the paper's side is the claim's (a above b), and an interval on that side is
"reproduced (sign only)". A tolerance claim ("a comparable to b, at most t points below") is reproduced when
lo ≥ −t, contradicted when hi < −t, underpowered when the interval is wider than t on either side, and
inconclusive otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

MIN_SEEDS = 3                   # the fewest common seeds a verdict is given on
CLAIM_SEEDS = 5                 # the seeds every row a claim reads is to hold (`fedlab results --todo`)

REPRODUCED = "reproduced"
SMALLER = "same sign, smaller than the paper's"
LARGER = "same sign, larger than the paper's"
CONTRADICTED = "contradicted"
UNDERPOWERED = "underpowered"
INCONCLUSIVE = "inconclusive"
NO_CONTROL = "no control"
TOO_FEW_SEEDS = "too few seeds"
STALE = "stale"
NOT_RUN = "not run yet"

# (word, what it means), in the order a summary counts them
VOCABULARY = (
    (REPRODUCED, "the 95 % interval of a − b excludes 0 on the paper's side and holds the paper's effect "
                 "(*sign only*: the paper gives no number)"),
    (SMALLER, "the interval excludes 0 on the paper's side, but the paper's effect lies beyond it"),
    (LARGER, "the interval excludes 0 on the paper's side, and lies beyond the paper's effect"),
    (CONTRADICTED, "the interval excludes 0 on the other side (for *comparable*: lies below −tolerance)"),
    (UNDERPOWERED, "the interval holds 0 and the paper's effect is below the MDE: not finding it says nothing"),
    (INCONCLUSIVE, "the interval holds 0 although the seeds could have found the paper's effect; the effects it "
                   "excludes are named"),
    (NO_CONTROL, "the reference the claim rests on does not learn a task it reads, in some seed: the difference "
                 "is shown, not judged"),
    (TOO_FEW_SEEDS, f"fewer than {MIN_SEEDS} common seeds: the difference is shown, not judged"),
    (STALE, "a row's records were made by another config than the script runs now: re-run it"),
    (NOT_RUN, "a row has no records yet"),
)
WORDS = tuple(w for w, _ in VOCABULARY)


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict: its `word` (one of WORDS) and what qualifies it (the effects an interval excludes,
    the failing control, the seed count)."""
    word: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.word} ({self.detail})" if self.detail else self.word

    @property
    def judged(self) -> bool:
        """Whether the records answer the claim (the words a reader can act on), not a reason they cannot."""
        return self.word in (REPRODUCED, SMALLER, LARGER, CONTRADICTED, UNDERPOWERED, INCONCLUSIVE)


def directional(mean: float, half: float, mde: float, paper: float | None) -> Verdict:
    """The verdict of "a above b" (or below, when the paper's effect is negative) from the paired differences'
    mean, 95 % half-width and MDE, in points."""
    lo, hi = mean - half, mean + half
    side = 1.0 if paper is None or paper >= 0 else -1.0
    if math.isfinite(half) and abs(mean) > half:           # the interval excludes 0
        if mean * side < 0:
            return Verdict(CONTRADICTED)
        if paper is None:
            return Verdict(REPRODUCED, "sign only")
        if lo <= paper <= hi:
            return Verdict(REPRODUCED)
        return Verdict(SMALLER if abs(paper) > max(abs(lo), abs(hi)) else LARGER, f"paper {paper:+.1f}")
    if paper is not None and abs(paper) < mde:
        return Verdict(UNDERPOWERED, f"paper {paper:+.1f} < MDE {mde:.1f}")
    excluded = f"excludes < {lo:+.1f} and > {hi:+.1f}"
    if paper is not None and not lo <= paper <= hi:
        excluded += f": the paper's {paper:+.1f} is ruled out"
    return Verdict(INCONCLUSIVE, excluded)


def tolerance(mean: float, half: float, tol: float) -> Verdict:
    """The verdict of "a comparable to b, at most `tol` points below"."""
    lo, hi = mean - half, mean + half
    if lo >= -tol:
        return Verdict(REPRODUCED, f"within {tol:g}")
    if hi < -tol:
        return Verdict(CONTRADICTED, f"more than {tol:g} below")
    if half > tol:
        return Verdict(UNDERPOWERED, f"interval ± {half:.1f} wider than the tolerance {tol:g}")
    return Verdict(INCONCLUSIVE, f"excludes < {lo:+.1f} and > {hi:+.1f}")


def legend() -> list[str]:
    """The vocabulary as Markdown lines, for every page that shows verdicts."""
    return ["Verdicts (`fedlab.evidence.verdicts`; MDE: the smallest true difference these seeds detect with 80 % "
            "power, paired t-test, two-sided α = 0.05):", "",
            *[f"- *{w}*: {meaning}" for w, meaning in VOCABULARY], "",
            "Beside a verdict, *seeds made at several commits* names the rows (the claim's own and its controls') "
            "whose seeds at the claim's seeds come from more than one commit, and *seeds from uncommitted changes* "
            "those made from a dirty tree: its evidence is not one clean commit per row until they are re-made "
            "(`--mixed` lists the commands for rows at several commits)."]
