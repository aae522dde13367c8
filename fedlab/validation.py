"""Config errors and the checks that raise them: one line naming the dotted key, the bad value and what is
allowed. A leaf module: method configs import it without importing the experiment config (no cycle)."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A bad config value; the message is one line naming the dotted key."""


def check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {value!r} is not allowed; expected {allowed}")


def choose(value: str, allowed, key: str, prefix: str = "") -> None:
    if value not in allowed:
        close = difflib.get_close_matches(value, list(allowed), n=1) or sorted(
            a for a in allowed if a.startswith(value) or value.startswith(a))[:1]
        hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
        raise ConfigError(f"{key}: {prefix + value!r} is not allowed{hint}; allowed: "
                          + ", ".join(prefix + a for a in sorted(allowed)))


@dataclass(frozen=True)
class MethodConfig:
    """Base of every method's config; each method subclasses it with its own documented fields."""
    name: str = "fedavg"

    # whether clients may run different models (model.clients); methods that average weights may not
    heterogeneous_clients: ClassVar[bool] = False
