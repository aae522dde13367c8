"""The method registry: `register_method(name, config_cls, method_cls)`, one explicit call per method
(in `fedlab/methods/__init__.py`), no import magic. `method_cls` may be a class or a "module:Class"
string imported on first use (keeps config validation free of model libraries)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class MethodEntry:
    name: str
    config_cls: type
    target: object  # a class, or "module:Class"

    @property
    def method_cls(self) -> type:
        if isinstance(self.target, str):
            module, _, attr = self.target.partition(":")
            return getattr(importlib.import_module(module), attr)
        return self.target


_METHODS: dict[str, MethodEntry] = {}


def register_method(name: str, config_cls: type, method_cls) -> None:
    if name in _METHODS and _METHODS[name].target != method_cls:
        raise ValueError(f"method {name!r} is already registered")
    _METHODS[name] = MethodEntry(name, config_cls, method_cls)


def _load() -> None:
    import fedlab.methods  # noqa: F401  (its __init__ registers every method)


def method_names() -> list[str]:
    _load()
    return sorted(_METHODS)


def get(name: str) -> MethodEntry:
    _load()
    return _METHODS[name]
