"""Named model transforms. A transform is registered under a name with its declared parameters; a method
names one in its client instructions as a small hashable spec, `Transform("proxy", ((0, 2, 3),))`, and
every process builds the model from its own copy of the base weights (`fedlab.runtime.resident`) without
knowing which method asked for it.

A transform function receives the model and a `Build` record and returns the new model; it declares what
it made in the record: named parameter groups (`build.groups`, by parameter identity, resolved to names once
the model is final) and the blocks that get LoRA (`build.lora_layers`). The `lora` transform ends every
chain (added with the config's `model.lora` settings when a chain has none) and declares the trainable and
communicated keys. Nothing downstream selects parameters by substrings of their names.

    @register_transform("proxy", params=("kept_layers", "lora_layers"))
    def proxy(model, build, kept_layers, lora_layers=None): ...

Specs are positional in the declared parameter order, trailing defaults dropped, so a spec reads like the
call it stands for: `("proxy", (0, 2, 3))`.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn


@dataclass(frozen=True)
class TransformDef:
    name: str
    params: tuple[str, ...]
    fn: Callable
    about: str = ""
    ends_chain: bool = False    # declares the trainable keys itself: no LoRA is added after it


@dataclass
class Build:
    """What the transforms of one chain declared while building a model."""
    lora: Any                                   # the config's LoraConfig: defaults of the `lora` transform
    seed: int                                   # seed of the LoRA initialisation
    groups: dict[str, list[nn.Parameter]] = field(default_factory=dict)
    lora_layers: tuple[int, ...] | None = None  # blocks that get LoRA (None: every block)
    spec: Any = None                            # the AdapterSpec the chain's last transform declares
    kept_initial: set[str] = field(default_factory=set)   # groups whose initial values the resident keeps


_TRANSFORMS: dict[str, TransformDef] = {}


def register_transform(name: str, params: tuple[str, ...] = (), ends_chain: bool = False):
    """Decorator: register `fn(model, build, *params)` under `name` (a second registration of another
    function under the same name is an error). `ends_chain`: the transform declares the trainable and
    communicated keys (`build.spec`) itself, so a chain that has it gets no LoRA."""
    def deco(fn):
        known = _TRANSFORMS.get(name)
        if known is not None and known.fn is not fn and known.fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"model transform {name!r} is already registered ({known.fn.__module__})")
        doc = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        _TRANSFORMS[name] = TransformDef(name, tuple(params), fn, doc, ends_chain)
        return fn
    return deco


def transform_names() -> list[str]:
    return sorted(_TRANSFORMS)


def get_transform(name: str) -> TransformDef:
    """A registered transform (the built-ins register when `fedlab.transforms` is imported; a method's own
    when its module is)."""
    if name not in _TRANSFORMS:
        raise ValueError(f"unknown model transform {name!r}; registered: {', '.join(sorted(_TRANSFORMS))}")
    return _TRANSFORMS[name]


def _frozen(v):
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


def _listed(v):
    return [_listed(x) for x in v] if isinstance(v, (list, tuple)) else v


@dataclass(frozen=True)
class Transform:
    """A named transform with its arguments, positional in the declared parameter order."""
    name: str
    args: tuple = ()

    def canonical(self) -> tuple:
        return (self.name, *self.args)

    def kwargs(self) -> dict:
        return dict(zip(get_transform(self.name).params, self.args))

    def __str__(self) -> str:
        return str(self.canonical())


def transform(name: str, **kwargs) -> Transform:
    """A spec from keyword arguments, checked against the declared parameters."""
    params = get_transform(name).params
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ValueError(f"model transform {name!r}: unknown parameters {unknown}; declared: {list(params)}")
    args = [_frozen(kwargs.get(p)) for p in params]
    while args and args[-1] is None:   # trailing unset (None) parameters are left out of the spec
        args.pop()
    return Transform(name, tuple(args))


Chain = tuple  # tuple[Transform, ...]


def chain_to_wire(chain: Chain) -> list | None:
    """JSON form for a message: a chain of one transform is written as that transform, `[name, *args]`."""
    if not chain:
        return None
    forms = [[t.name, *_listed(t.args)] for t in chain]
    return forms[0] if len(forms) == 1 else forms


def chain_from_wire(obj) -> Chain:
    if not obj:
        return ()
    forms = [obj] if isinstance(obj[0], str) else obj
    return tuple(Transform(f[0], tuple(_frozen(a) for a in f[1:])) for f in forms)


def seed_part(chain: Chain):
    """The chain's part of the LoRA-initialisation seed: None, the one transform's canonical tuple, or the
    tuple of all of them."""
    if not chain:
        return None
    return chain[0].canonical() if len(chain) == 1 else tuple(t.canonical() for t in chain)


def apply_chain(model: nn.Module, chain: Chain, build: Build) -> nn.Module:
    """Apply each transform in order; a chain without `lora` (or another transform that ends a chain) ends
    with the config's LoRA."""
    if not any(t.name == "lora" or get_transform(t.name).ends_chain for t in chain):
        chain = (*chain, Transform("lora"))
    for t in chain:
        model = get_transform(t.name).fn(model, build, *t.args)
    return model


def declared_keys(model: nn.Module, groups: dict[str, list[nn.Parameter]]) -> dict[str, tuple[str, ...]]:
    """Parameter names of each declared group, in the model's parameter order (groups are declared by
    parameter identity, so names given by later wrappers — peft's `base_layer` — resolve correctly)."""
    names = {id(p): n for n, p in model.named_parameters()}
    order = {n: i for i, n in enumerate(names.values())}
    return {g: tuple(sorted((names[id(p)] for p in ps if id(p) in names), key=order.__getitem__))
            for g, ps in groups.items()}
