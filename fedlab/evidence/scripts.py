"""The table scripts as modules: `load_table` imports `experiments/<name>/make_tables.py` (or another script of
that folder), `systems` every one that declares a `SYSTEM` (`page.System`), `page_scripts` every script that
writes a page of its own (it declares `OUT`: budgets, families, tuning). The table scripts are scripts, not a
package, so they are loaded from their files.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from fedlab.evidence.records import ROOT

EXPERIMENTS = ROOT / "experiments"


def load_table(name: str, root: Path = EXPERIMENTS, script: str | None = None):
    """experiments/<name>/make_tables.py (or make_table.py; or `script`.py of that folder, e.g. ELSA's
    privacy_table) as a module: the one loader of the table scripts, for the tests and `fedlab results`."""
    folder = Path(root) / name
    names = (f"{script}.py",) if script else ("make_tables.py", "make_table.py")
    path = next((folder / n for n in names if (folder / n).exists()), None)
    if path is None:
        raise FileNotFoundError(f"{folder}: no {' or '.join(names)}")
    if str(folder) not in sys.path:     # its sibling modules (experiments/<name>/<name>_*.py), as a script sees them
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"fedlab_table_{name}" + (f"_{script}" if script else ""), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def systems(root: Path = EXPERIMENTS) -> list:
    """The table modules that declare a SYSTEM, in the order of their folders' names."""
    out = []
    for folder in sorted(p for p in Path(root).iterdir() if (p / "make_tables.py").exists()):
        mod = load_table(folder.name, root)
        if getattr(mod, "SYSTEM", None) is not None:
            out.append(mod)
    return out


def page_scripts(root: Path = EXPERIMENTS) -> list[str]:
    """"<system>/<script>" of every table script that writes a page of its own (it declares OUT)."""
    return sorted(f"{p.parent.name}/{p.stem}" for p in Path(root).glob("*/*.py") if "\nOUT = " in p.read_text())
