"""The help text of the config fields, read back from where they are declared (`fedlab.validation.doc` puts it
in each field's metadata): rows and Markdown tables for the documentation, the sections of an experiment
config, and the lines of `fedlab config show` (each resolved value with its default, its help and where it came
from)."""
from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from dataclasses import dataclass
from typing import Any

DEFAULT_SOURCE = "default"


@dataclass(frozen=True)
class Row:
    """One documented key: dotted key, type as written, default value, help text."""
    key: str
    type: str
    default: Any
    help: str


@dataclass(frozen=True)
class Section:
    """A part of an experiment config: its key prefix ("" for the top-level keys), its config class and, for a
    method's config (prefix "method"), the `method.name` that selects it."""
    prefix: str
    cls: type
    method: str | None = None

    @property
    def rows(self) -> list[Row]:
        # the top-level section lists the keys of no section of their own (seed, plugins, faults, …)
        return fields(self.cls, self.prefix, nested=bool(self.prefix))


def help_of(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def default_of(f: dataclasses.Field) -> Any:
    """A field's default (a factory's product); `dataclasses.MISSING` when it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _hints(cls) -> dict:
    try:
        return typing.get_type_hints(cls)
    except Exception:           # an annotation that does not resolve: documented as written
        return {}


def _qualified(text: str) -> str:
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)   # typing.Optional → Optional


def type_name(f: dataclasses.Field, hint=None) -> str:
    """The field's type as its declaration writes it (a Literal alias spelled out)."""
    if isinstance(f.type, str):
        if hint is not None and typing.get_origin(hint) is typing.Literal and "Literal" not in f.type:
            return _qualified(repr(hint))
        return f.type
    if isinstance(f.type, type) and not typing.get_args(f.type):
        return f.type.__name__
    return _qualified(repr(f.type))


def _element_class(hint):
    """The dataclass of a list / tuple field's items (faults, method.devices), else None."""
    if typing.get_origin(hint) in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        if len(args) == 1 and dataclasses.is_dataclass(args[0]):
            return args[0]
    return None


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def fields(cls, prefix: str = "", *, nested: bool = True) -> list[Row]:
    """The documented keys of config class `cls` under `prefix`, in declaration order: a nested config's keys
    instead of the nested config (with `nested`; without, nested configs are left out), and after a list of
    configs (`faults`) the keys of one item (`faults[].kind`)."""
    hints = _hints(cls)
    rows: list[Row] = []
    for f in dataclasses.fields(cls):
        key, hint = _join(prefix, f.name), hints.get(f.name)
        if dataclasses.is_dataclass(hint):
            if nested:
                rows += fields(hint, key)
            continue
        rows.append(Row(key, type_name(f, hint), default_of(f), help_of(f)))
        item = _element_class(hint)
        if item is not None:
            rows += fields(item, f"{key}[]")
    return rows


def sections() -> list[Section]:
    """Every part of an experiment config: the top-level keys (prefix ""), each top-level section (model,
    data, …) and the config of every registered method (prefix "method", selected by `method.name`)."""
    from fedlab import registry
    from fedlab.config import ExperimentConfig

    hints = _hints(ExperimentConfig)
    out = [Section("", ExperimentConfig)]
    for f in dataclasses.fields(ExperimentConfig):
        if f.name != "method" and dataclasses.is_dataclass(hints.get(f.name)):
            out.append(Section(f.name, hints[f.name]))
    out += [Section("method", registry.get(name).config_cls, name) for name in registry.method_names()]
    return out


def format_value(value: Any) -> str:
    """A value as a YAML file or a `key=value` override writes it (flow style: null, true, [1, 2], {a: 1})."""
    import yaml

    def plain(v):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    if value is dataclasses.MISSING:
        return "(required)"
    text = yaml.safe_dump(plain(value), default_flow_style=True, sort_keys=False, width=float("inf"),
                          allow_unicode=True).strip()
    return text[:-3].rstrip() if text.endswith("\n...") else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(cls, prefix: str = "") -> str:
    """A Markdown table `| key | type | default | meaning |` of `cls`'s keys under `prefix`."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for r in fields(cls, prefix):
        lines.append(f"| `{_cell(r.key)}` | `{_cell(r.type)}` | `{_cell(format_value(r.default))}` | {_cell(r.help)} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# the resolved config (`fedlab config show`)
@dataclass(frozen=True)
class Resolved:
    """One leaf key of a resolved config: its value, its field's default and help, where the value came from."""
    key: str
    value: Any
    default: Any
    help: str
    source: str


def _source(key: str, sources: dict[str, str]) -> str:
    if key in sources:
        return sources[key]
    under = sorted({v for k, v in sources.items() if k.startswith(key + ".")})
    if under:
        return "command line" if "command line" in under else ", ".join(under)
    return DEFAULT_SOURCE


def resolved(cfg, sources: dict[str, str] | None = None, prefix: str = "") -> list[Resolved]:
    """The leaf keys of config `cfg` (nested configs descended into; the method's fields are its own class's),
    with what `fedlab.config.load_config_with_sources` says set them (else "default")."""
    sources = sources or {}
    out: list[Resolved] = []
    for f in dataclasses.fields(cfg):
        key, value = _join(prefix, f.name), getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out += resolved(value, sources, key)
        else:
            out.append(Resolved(key, value, default_of(f), help_of(f), _source(key, sources)))
    return out


def show_lines(cfg, sources: dict[str, str] | None = None, key_prefix: str = "") -> list[str]:
    """One line per leaf key starting with `key_prefix`: `key = value  [default: …; source: …]  help`. A prefix
    no key starts with is a ConfigError naming the closest key."""
    from fedlab.validation import ConfigError

    items = resolved(cfg, sources)
    shown = [r for r in items if r.key.startswith(key_prefix)]
    if not shown:
        keys = [r.key for r in items]
        close = difflib.get_close_matches(key_prefix, keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        sections_ = sorted({k.split(".", 1)[0] for k in keys}, key=[k.split(".", 1)[0] for k in keys].index)
        raise ConfigError(f"config show: no key of this config starts with {key_prefix!r}{hint}; keys start with: "
                          f"{', '.join(sections_)}")
    width = max(len(r.key) for r in shown)
    return [f"{r.key:<{width}} = {format_value(r.value)}  [default: {format_value(r.default)}; source: {r.source}]"
            f"  {r.help}".rstrip() for r in shown]
