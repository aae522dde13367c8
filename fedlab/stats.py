"""Means over seeds with 95 % intervals, and paired comparisons between two methods over the same seeds."""
from __future__ import annotations

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
    return {"mean": mean, "half": half, "p": p, "n": len(diffs),
            "significant": bool(math.isfinite(half) and abs(mean) > half)}


def fmt_ci(values, digits: int = 3) -> str:
    """'0.512 ± 0.020' (mean ± 95 % half-width); one value prints alone; none prints '-'."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "-"
    mean, half = mean_ci(vals)
    return f"{mean:.{digits}f}" if math.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"
