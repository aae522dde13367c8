"""Slow tier: a scripted pass of damaged, missing and odd inputs of every kind through the
real command line, each in a fresh process from a folder outside the repository; any traceback, a second line
of error or a hang fails it. The default tier tests each reader in-process (tests/cli/test_damaged_inputs.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = str(ROOT / "experiments/defaults.yaml")
FLOE = str(ROOT / "experiments/floe/hetero.yaml")
PROFILE = (ROOT / "experiments/floe/profile_tiny-llama-s.json").read_text()


def _write(tmp: Path) -> None:
    (tmp / "broken.yaml").write_text("method: {name: fedavg\n")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "cut.json").write_text(PROFILE[:50])
    (tmp / "empty.json").write_text("")
    (tmp / "shape.json").write_text(json.dumps({"ranks": [4, 8]}))
    (tmp / "rows.json").write_text('[{"instruction": "a", "output": "b"}, {"instruction": 3}]')
    (tmp / "notdb.db").write_bytes(b"garbage" * 200)
    (tmp / "hf").mkdir()


TRACK = lambda tmp: [f"tracking.uri=sqlite:///{tmp}/m.db", f"tracking.artifact_root={tmp}/a",  # noqa: E731
                     f"output_dir={tmp}/runs"]

# (id, argv after `fedlab`, what the one error line must contain)
CASES = [
    ("missing config", ["run", "nope.yaml"], "nope.yaml"),
    ("broken yaml", ["run", "broken.yaml"], "not valid YAML"),
    ("yaml not a mapping", ["run", "list.yaml"], "must hold a mapping"),
    ("unknown key", ["run", DEFAULTS, "federation.roundz=3"], "roundz"),
    ("profile cut short", ["run", FLOE, "method.profile=cut.json"], "method.profile: "),
    ("profile empty", ["run", FLOE, "method.profile=empty.json"], "is empty"),
    ("profile missing", ["run", FLOE, "method.profile=nope.json"], "no such file"),
    ("profile wrong shape", ["run", FLOE, "method.profile=shape.json"], "not a rank profile"),
    ("public rows of the wrong shape", ["run", DEFAULTS, *PICO, "method.name=fedavg", "data.public_path=rows.json",
                                        "data.public_size=2"], "data.public_path"),
    ("hf folder without the data", ["run", DEFAULTS, *PICO, "data.source=hf:sst2", "data.hf_dir=hf"], "data.hf_dir"),
    ("mlflow store not a database", ["run", DEFAULTS, *PICO, "tracking.uri=sqlite:///notdb.db"], "tracking.uri"),
    ("data describe of a damaged config", ["data", "describe", "broken.yaml"], "not valid YAML"),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_damaged_input_ends_in_one_line(case, pico_zoo, tmp_path):
    _, argv, needle = case
    _write(tmp_path)
    extra = TRACK(tmp_path) if argv[0] == "run" and not any(a.startswith("tracking.uri") for a in argv) else []
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", *argv, *extra], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={**os.environ})
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert lines[-1].startswith("fedlab: error: ") and needle in lines[-1], lines[-1]
    assert not [ln for ln in lines[:-1] if "Error" in ln], lines


@pytest.mark.slow
def test_a_shipped_yaml_runs_from_a_folder_outside_the_repository(pico_zoo, tmp_path):
    """The issue's example: Floe's YAML names its pinned profile relative to itself."""
    args = [FLOE, *PICO, "federation.rounds=1", "data.num_clients=3", "data.tasks=[recall,sentiment]",
            "data.partition=by_task", "method.llm=null", "method.router_encoder=pico-bert", *TRACK(tmp_path)]
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", "run", *args], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
