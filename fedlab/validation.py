"""Config errors and the checks that raise them: one line naming the dotted key, the bad value and what is
allowed. A leaf module: method configs import it without importing the experiment config (no cycle)."""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import MISSING, dataclass
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


def doc(default: Any = MISSING, help: str = "", *, factory: Any = None, **metadata: Any):
    """A config field that carries its help text (`dataclasses.field(metadata={"help": ...})`, as PEFT's
    configs do): `topk: int = doc(16, "K: top-K logits per position")`; a mutable default is given as a
    `factory` (`doc(help="...", factory=list)`). Other keywords are further metadata (`input_path=True`).
    `fedlab.config_help` reads the help back (documentation tables, `fedlab config show`)."""
    if factory is not None and default is not MISSING:
        raise TypeError("doc: give a default or a factory, not both")
    meta = {"help": help, **metadata}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# the help of every method config's `name` field
METHOD_NAME_HELP = "the method to run; it selects the method's config class, hence the other `method.` keys"


def seed_list(text: str) -> list[int]:
    """The seeds of a `--seeds 0,1,2` option: distinct integers, at least one (ConfigError in one line)."""
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: {text!r} is not allowed; expected distinct integers, e.g. 0,1,2")
    return seeds


@dataclass(frozen=True)
class MethodConfig:
    """Base of every method's config; each method subclasses it with its own documented fields. A variant
    that is a parameterisation of another (TIES of FedProxy, FedOT of the Offsite-Tuning family) names
    the fields it pins in `fixed`: setting one to another value is an error naming the method to use."""
    name: str = doc("fedavg", METHOD_NAME_HELP)

    # whether clients may run different models (model.clients); methods that average weights may not
    heterogeneous_clients: ClassVar[bool] = False
    # fields this method pins to its defaults (a variant's defining parameters)
    fixed: ClassVar[tuple[str, ...]] = ()
    # the method to name instead when a fixed field should change
    general: ClassVar[str | None] = None

    def plan_roles(self, cfg) -> list | None:
        """The roles `fedlab plan` sizes for a run of this method (`fedlab.plan.roles.Role`): who holds which model
        and what each sends. None: the default shape, LoRA clients of `model.name` and a server (FedAvg's)."""
        return None

    def check_fixed(self, p: str = "method") -> None:
        from dataclasses import fields

        defaults = {f.name: f.default for f in fields(self)}
        for key in self.fixed:
            value = getattr(self, key)
            if value != defaults[key]:
                use = f"; use method.name={self.general} to set it" if self.general else ""
                raise ConfigError(f"{p}.{key}: {value!r} is not allowed with method {self.name!r}, which fixes "
                                  f"it at {defaults[key]!r}{use}")


def positive_int(text: str) -> int:
    """An argparse type: an integer ≥ 1 (a count of zero would mean nothing), else argparse's one-line error."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected an integer >= 1")
    return value
