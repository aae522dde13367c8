"""Means over seeds with 95 % intervals, and paired comparisons between two methods over the same seeds."""
from __future__ import annotations

import functools
import math


def mean_ci(values, level: float = 0.95) -> tuple[float, float]:
    """(mean, half-width of the Student-t interval at `level`); the half-width is nan for one value."""
    from scipy import stats

    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return math.nan, math.nan
    mean = sum(xs) / n
    if n == 1:
        return mean, math.nan
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return mean, float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)


def paired_difference(a, b, level: float = 0.95) -> dict:
    """Mean of a − b over paired seeds, its interval, and the two-sided paired t-test p-value
    (`significant`: the interval excludes 0)."""
    from scipy import stats

    diffs = [float(x) - float(y) for x, y in zip(a, b)]
    mean, half = mean_ci(diffs, level)
    if len(diffs) < 2:
        p = math.nan
    elif all(d == diffs[0] for d in diffs):
        p = 0.0 if diffs[0] != 0 else 1.0
    else:
        p = float(stats.ttest_rel([float(x) for x in a], [float(y) for y in b]).pvalue)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else math.nan
    return {"mean": mean, "half": half, "p": p, "n": len(diffs), "sd": sd, "mde": mde_paired(sd, len(diffs)),
            "significant": bool(math.isfinite(half) and abs(mean) > half)}


def mde_paired(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The minimum detectable effect of a two-sided paired t-test on n pairs whose differences have standard
    deviation `sd`: the true mean difference δ at which P(|T| > t_{1−α/2, n−1}) = power, with T noncentral-t of
    n − 1 degrees of freedom and noncentrality δ·√n / sd (nan for n < 2; 0 when the differences do not vary).
    δ is proportional to sd: sd · `_mde_unit(n)`."""
    if n < 2 or not math.isfinite(sd):
        return math.nan
    return sd * _mde_unit(n, alpha, power) if sd > 0 else 0.0


@functools.lru_cache(maxsize=64)
def _mde_unit(n: int, alpha: float, power: float) -> float:
    """The MDE of `mde_paired` for sd = 1."""
    from scipy import integrate, optimize, stats

    df, crit = n - 1, float(stats.t.ppf(1 - alpha / 2, n - 1))

    def reach(d: float) -> float:
        # P(|T| > crit), T = (Z + nc) / sqrt(V / df), V ~ χ²(df): integrated over V (scipy's noncentral t
        # loses its accuracy for one degree of freedom and large nc)
        nc = d * math.sqrt(n)
        inner = lambda v: (stats.norm.sf(crit * math.sqrt(v / df) - nc) + stats.norm.cdf(-crit * math.sqrt(v / df) - nc)
                           ) * stats.chi2.pdf(v, df)
        return integrate.quad(inner, 0, math.inf, limit=200)[0] - power

    hi = 1.0
    while reach(hi) < 0:
        hi *= 2
    return float(optimize.brentq(reach, 0.0, hi, xtol=1e-10))


def fmt_ci(values, digits: int = 3, signed: bool = False) -> str:
    """'0.512 ± 0.020' (mean ± 95 % half-width; '+0.512 …' when `signed`, for a difference); one value prints
    alone; none prints '-'."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "-"
    mean, half = mean_ci(vals)
    sign = "+" if signed else ""
    return f"{mean:{sign}.{digits}f}" if math.isnan(half) else f"{mean:{sign}.{digits}f} ± {half:.{digits}f}"
