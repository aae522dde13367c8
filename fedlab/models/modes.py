"""Module modes for forwards that must be functions of the weights alone."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def eval_mode(*models):
    """Within: every model in eval mode (dropout off, so a forward depends on the weights and inputs only, not
    on the random state or on whether a client just trained the shared resident); after: each back in the
    mode it had."""
    before = [(mod, mod.training) for m in models for mod in m.modules()]
    for m in models:
        m.eval()
    try:
        yield models[0] if len(models) == 1 else models
    finally:
        for mod, was in before:          # each submodule's own flag (one frozen in eval stays in eval)
            mod.training = was
