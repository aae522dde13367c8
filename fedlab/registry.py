"""The method registry. Every method registers itself, in its own package's `__init__.py`:

    register_method("fedavg", config_cls=FedAvgConfig, method_cls="fedlab.methods.fedavg.method:FedAvg",
                    client_cls="fedlab.methods.client:LoraClient")

Classes may be given as "module:Class" strings, imported on first use: validating a config imports no
model library, and a worker process imports a method's client side only. Methods are found in three
places, all loaded before a config is built:
- every package under `fedlab/methods/` (imported once; its `__init__` makes the register call);
- the Python entry-point group `fedlab.methods` (an installed package names a module that registers);
- the `plugins` of a config: module names or paths of `.py` files, imported first (a researcher's own
  method runs with `fedlab run` without editing fedlab).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CLIENT = "fedlab.methods.client:LoraClient"


def _resolve(target):
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    return target


@dataclass(frozen=True)
class MethodEntry:
    name: str
    config_cls: type
    target: object          # the server-side class, or "module:Class"
    client_target: object   # the client-side class, or "module:Class"

    @property
    def method_cls(self) -> type:
        return _resolve(self.target)

    @property
    def client_cls(self) -> type:
        return _resolve(self.client_target)


@dataclass(frozen=True)
class CommandEntry:
    """A `fedlab <name>` subcommand a method package brings: `add_arguments(parser)` declares its arguments and
    `run(args) -> int` runs it (each a callable or "module:function", imported when the command is used)."""
    name: str
    help: str
    add_arguments: object
    run: object


_METHODS: dict[str, MethodEntry] = {}
_COMMANDS: dict[str, CommandEntry] = {}
_LOADED = False


def register_command(name: str, help: str, add_arguments, run) -> None:
    """Register a `fedlab <name>` subcommand that belongs to a method (Floe's `profile`); the CLI lists it with
    its own. Registering another command under a taken name is an error."""
    known = _COMMANDS.get(name)
    if known is not None and not (_same(known.add_arguments, add_arguments) and _same(known.run, run)):
        raise ValueError(f"command {name!r} is already registered")
    _COMMANDS[name] = CommandEntry(name, help, add_arguments, run)


def commands() -> list[CommandEntry]:
    """The subcommands method packages registered, by name."""
    _load()
    return [_COMMANDS[k] for k in sorted(_COMMANDS)]


def resolve(target):
    """A callable or class given as itself or as "module:name"."""
    return _resolve(target)


def _same(a, b) -> bool:
    """The same target, also when a module defining a class was imported again (a re-read plugin file)."""
    if a == b:
        return True
    key = lambda t: t if isinstance(t, str) else (getattr(t, "__module__", None), getattr(t, "__qualname__", None))  # noqa: E731
    return key(a) == key(b)


def register_method(name: str, config_cls: type, method_cls, client_cls=DEFAULT_CLIENT) -> None:
    """Register a method: its config dataclass (a `MethodConfig` whose `name` defaults to `name`), its
    server-side class and its client class (default `LoraClient`). Registering another method under a
    taken name is an error."""
    known = _METHODS.get(name)
    if known is not None and not (_same(known.target, method_cls) and _same(known.client_target, client_cls)):
        raise ValueError(f"method {name!r} is already registered (by {known.config_cls.__module__})")
    _METHODS[name] = MethodEntry(name, config_cls, method_cls, client_cls)


def _load() -> None:
    """Built-in methods (every package under fedlab/methods) and the `fedlab.methods` entry points."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    # discovered like plugins, by name: the registry depends on no method's code
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).with_name("methods"))]), key=lambda i: i.name):
        if info.ispkg:
            importlib.import_module(f"fedlab.methods.{info.name}")
    from importlib.metadata import entry_points

    for ep in entry_points(group="fedlab.methods"):
        ep.load()


def load_plugins(plugins) -> None:
    """Import each plugin (a module name, or the path of a .py file) so that it registers its methods and
    transforms. A file is imported once per process under a name derived from its resolved path."""
    _load()
    for plugin in plugins or ():
        if plugin.endswith(".py") or "/" in plugin:
            path = Path(plugin).expanduser().resolve()
            if not path.is_file():
                from fedlab.validation import ConfigError

                raise ConfigError(f"plugins: {plugin!r} is not a Python file or an importable module")
            mod_name = f"fedlab_plugin_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
            if mod_name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as e:             # the plugin's own error: one line naming the plugin and where
                del sys.modules[mod_name]
                raise _plugin_error(plugin, e) from None
            except BaseException:
                del sys.modules[mod_name]
                raise
        else:
            try:
                importlib.import_module(plugin)
            except ImportError as e:
                from fedlab.validation import ConfigError

                raise ConfigError(f"plugins: module {plugin!r} cannot be imported ({e})") from None
            except Exception as e:
                raise _plugin_error(plugin, e) from None


def _plugin_error(plugin: str, e: Exception):
    """A ConfigError naming the plugin, its error and the line of the plugin that raised it."""
    import traceback

    from fedlab.validation import ConfigError

    frames = [f for f in traceback.extract_tb(e.__traceback__) if "fedlab/registry.py" not in f.filename
              and "importlib" not in f.filename and "<frozen" not in f.filename]
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return ConfigError(f"plugins: {plugin!r} raised {type(e).__name__}: {e}{where} while being imported; fix the "
                       "plugin or remove it from `plugins`")


def method_names() -> list[str]:
    _load()
    return sorted(_METHODS)


def get(name: str) -> MethodEntry:
    _load()
    if name not in _METHODS:
        raise KeyError(f"method {name!r} is not registered; registered: {', '.join(sorted(_METHODS))}")
    return _METHODS[name]
