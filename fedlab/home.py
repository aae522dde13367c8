"""Where fedlab keeps what it builds (the zoo, converted real models, vocabulary maps): $FEDLAB_HOME,
default ~/.cache/fedlab."""
from __future__ import annotations

import os
from pathlib import Path


def fedlab_home() -> Path:
    return Path(os.environ.get("FEDLAB_HOME") or Path.home() / ".cache" / "fedlab")


def check_home() -> None:
    """$FEDLAB_HOME must be a folder, or not exist yet: a file there is one ConfigError naming it."""
    home = fedlab_home()
    if home.exists() and not home.is_dir():
        from fedlab.validation import ConfigError

        raise ConfigError(f"FEDLAB_HOME: {str(home)!r} is a file; expected a folder fedlab can keep its builds and "
                          "caches in (unset FEDLAB_HOME or point it at a folder)")
