"""Where fedlab keeps what it builds (the zoo, converted real models, vocabulary maps): $FEDLAB_HOME,
default ~/.cache/fedlab."""
from __future__ import annotations

import os
from pathlib import Path


def fedlab_home() -> Path:
    return Path(os.environ.get("FEDLAB_HOME") or Path.home() / ".cache" / "fedlab")
