"""A public (server) set read from rows on disk shaped like Alpaca's (`data.public_path`): a JSON list or JSON
Lines file of {"instruction", "input", "output"} objects (`input` may be empty or absent), as
tatsu-lab/alpaca and its derivatives publish them. FedProxy's and FedMKT's paper-scale public set is Alpaca;
offline it comes from such a file."""
from __future__ import annotations

import json
import random
from pathlib import Path

from fedlab.data.tasks import Example
from fedlab.files import input_path
from fedlab.validation import ConfigError

KEYS = ("instruction", "output")


def read_rows(path: str | Path) -> list[dict]:
    """The file's rows, each checked for the Alpaca keys (one clear line naming the row otherwise)."""
    p = input_path(path)
    if not p.is_file():
        raise ConfigError(f"data.public_path: {str(p)!r} is not a file (a JSON list or JSON Lines of "
                          "{instruction, input, output} rows)")
    from fedlab.files import read_text

    text = read_text(p, "data.public_path", "a JSON list or JSON Lines of {instruction, input, output} rows")
    try:
        rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines()
                                                                        if x.strip()]
    except json.JSONDecodeError as e:
        raise ConfigError(f"data.public_path: {p} is not JSON or JSON Lines ({e.msg}, line {e.lineno})") from None
    if not rows:
        raise ConfigError(f"data.public_path: {p} holds no rows; expected a JSON list or JSON Lines of "
                          "{instruction, input, output} rows")
    for i, r in enumerate(rows):
        missing = [k for k in KEYS if not isinstance(r, dict) or not isinstance(r.get(k), str)]
        if missing:
            raise ConfigError(f"data.public_path: row {i} of {p} lacks the text field(s) {missing}; Alpaca rows "
                              "have instruction, input (optional) and output")
    return rows


def alpaca_example(r: dict) -> Example:
    """instruction [+ input] → output, generative; the same prompt shape as the embedded instruction set."""
    extra = (r.get("input") or "").strip()
    prompt = f"instruction: {r['instruction'].strip()}" + (f" input: {extra}" if extra else "") + " response:"
    return Example(prompt, r["output"].strip(), "public", "alpaca")


def public_from_file(path: str | Path, n: int, seed: int) -> list[Example]:
    """n rows drawn from the file without replacement (seeded), in file order; n larger than the file is an
    error naming both."""
    rows = read_rows(path)
    if n > len(rows):
        raise ConfigError(f"data.public_size: {n} is more than the {len(rows)} rows of data.public_path {path}")
    chosen = sorted(random.Random(f"public-file/{seed}").sample(range(len(rows)), n))
    return [alpaca_example(rows[i]) for i in chosen]
