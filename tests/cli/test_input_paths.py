"""A relative input path written in a YAML is relative to that YAML's folder (like
`plugins`), one given on the command line to the working directory; stored relative to the repository root when
inside it, so a config means the same — and has the same identity — from any working directory."""
from __future__ import annotations

import glob
from pathlib import Path

import pytest

from fedlab.config import input_path_keys, load_config
from fedlab.files import ROOT, input_path
from fedlab.runtime.federation import run_key

YAMLS = sorted(Path(p) for p in glob.glob(str(ROOT / "experiments/**/*.yaml"), recursive=True))


def _values(cfg) -> dict[str, str]:
    """{dotted key: stored value} of the config's input paths that are set."""
    out = {}
    for key in input_path_keys():
        section, _, name = key.partition(".")
        value = getattr(getattr(cfg, section), name, None)
        if value:
            out[key] = value
    return out


def test_the_declared_input_paths():
    assert {"data.public_path", "data.hf_dir", "method.profile"} <= input_path_keys()


def test_a_yaml_path_is_relative_to_its_folder_also_through_defaults(tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    (exp / "child").mkdir(parents=True)
    (exp / "a.yaml").write_text("method: {name: floe, profile: prof.json}\n"
                                "data: {public_path: rows/alpaca.json, hf_dir: ../hf}\n")
    (exp / "child" / "b.yaml").write_text("defaults: ../a.yaml\nfederation: {rounds: 1}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for yaml in (exp / "a.yaml", exp / "child" / "b.yaml"):
        cfg = load_config(yaml)
        assert cfg.method.profile == str(exp / "prof.json")
        assert cfg.data.public_path == str(exp / "rows" / "alpaca.json")
        assert cfg.data.hf_dir == str(tmp_path / "hf")


def test_a_command_line_path_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(ROOT / "experiments/floe/hetero.yaml", ["method.profile=mine.json"])
    assert cfg.method.profile == str(tmp_path / "mine.json")
    monkeypatch.chdir(ROOT)
    cfg = load_config(ROOT / "experiments/floe/hetero.yaml", ["method.profile=experiments/floe/x.json"])
    assert cfg.method.profile == "experiments/floe/x.json"     # inside the repository: stored relative to it


def test_the_shipped_floe_profile_means_the_same_from_any_folder(tmp_path, monkeypatch):
    keys = set()
    for cwd in (ROOT, tmp_path, ROOT / "fedlab"):
        monkeypatch.chdir(cwd)
        cfg = load_config(Path(__file__).parents[2] / "experiments/floe/hetero.yaml")
        assert cfg.method.profile == "experiments/floe/profile_tiny-llama-s.json"
        keys.add(run_key(cfg))
    assert len(keys) == 1


@pytest.mark.parametrize("yaml", YAMLS, ids=[str(p.relative_to(ROOT)) for p in YAMLS])
def test_every_shipped_yaml_finds_its_files_from_outside_the_repository(yaml, tmp_path, monkeypatch):
    """Loaded from a folder outside the repository, every input file a shipped YAML names exists — but for the
    paper-scale YAMLs' data files, which a user supplies (their path is then under the YAML's folder) — and the
    run's preflight (which builds the data and reads those files: Floe's pinned profile) passes there, up to
    the model weights (the paper-scale YAMLs need the Hub; a real model needs its package)."""
    from fedlab.experiment import preflight
    from fedlab.models.real import REAL_MODELS, installed

    monkeypatch.chdir(tmp_path)
    cfg = load_config(yaml)
    for key, value in _values(cfg).items():
        p = input_path(value)
        if yaml.name.startswith("paper_"):
            assert p.is_relative_to(yaml.parent), (key, value)
        else:
            assert p.exists(), (key, value)
    if yaml.name.startswith("paper_") or (cfg.model.name in REAL_MODELS and not installed(cfg.model.name)):
        return
    preflight(cfg)
