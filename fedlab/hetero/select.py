"""Floe's resource-aware LoRA rank selection (Algorithm 1)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Union

Number = Union[int, float]
Predictor = Union[Callable[[int], Number], Mapping[int, Number]]


def _predict(predictor: Predictor, rank: int) -> float:
    return float(predictor[rank] if isinstance(predictor, Mapping) else predictor(rank))


def select_rank(ranks: Iterable[int], free_memory: Number | Callable[[], Number], predict_memory: Predictor,
                predict_latency: Predictor, deadline: Number | None) -> int | None:
    """The largest rank r of `ranks` with predict_memory(r) ≤ B and predict_latency(r) ≤ T, else None.

    B is the device's current free memory, read once (a number, or a callable returning it); ranks are
    tried largest first, duplicates removed, the input left unchanged; latency is predicted only for ranks
    whose memory fits. Predictors are callables rank → value or mappings {rank: value}; deadline None: no
    latency bound."""
    budget = float(free_memory() if callable(free_memory) else free_memory)
    limit = float("inf") if deadline is None else float(deadline)
    for r in sorted({int(x) for x in ranks}, reverse=True):
        if _predict(predict_memory, r) <= budget and _predict(predict_latency, r) <= limit:
            return int(r)
    return None
