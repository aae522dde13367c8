"""Every kind of file fedlab reads ends, when it is missing, empty, cut short or of
the wrong shape, in one line naming the file (and the config key that pointed at it) and what to do; a cache
(a zoo model built under FEDLAB_HOME) is rebuilt instead."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedlab.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
FLOE = ROOT / "experiments/floe/hetero.yaml"
GOOD_PROFILE = ROOT / "experiments/floe/profile_tiny-llama-s.json"


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    """A missing, an empty, a cut-short and a wrong-shape JSON file."""
    files = {"missing": tmp_path / "nope.json", "empty": tmp_path / "empty.json",
             "cut short": tmp_path / "cut.json", "wrong shape": tmp_path / "list.json"}
    files["empty"].write_text("")
    files["cut short"].write_text(GOOD_PROFILE.read_text()[:60])
    files["wrong shape"].write_text("[1, 2, 3]")
    return files


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("kind", ["missing", "empty", "cut short", "wrong shape", "no ranks"])
def test_a_bad_floe_profile_is_one_line_before_the_run(kind, tmp_path):
    from fedlab.methods.floe.method import Floe

    files = _bad_files(tmp_path)
    if kind == "no ranks":
        files[kind] = tmp_path / "noranks.json"
        files[kind].write_text(json.dumps({"ranks": [4], "memory_mb": {"4": 1.0}, "step_s": {}}))
    cfg = load_config(FLOE, [f"method.profile={files[kind]}"])
    with pytest.raises(ConfigError) as e:
        Floe.preflight(cfg, None)
    line = _one_line(e.value)
    assert line.startswith(f"method.profile: {files[kind]}: ") and "fedlab profile" in line, line


def test_the_shipped_profile_passes_the_check():
    from fedlab.methods.floe.method import Floe

    Floe.preflight(load_config(FLOE), None)


def test_a_profile_without_a_rank_of_the_config_is_one_line():
    from fedlab.methods.floe.method import Floe

    with pytest.raises(ConfigError, match=r"method.profile: .* has no entry for ranks \[128\]"):
        Floe.preflight(load_config(FLOE, ["method.ranks=[4,8,128]"]), None)


@pytest.mark.parametrize("kind", ["cut short", "wrong shape", "empty"])
def test_a_damaged_results_file_is_one_line_from_a_table_script(kind, tmp_path, capsys):
    from fedlab.evidence.runner import run_table

    results = tmp_path / "results.json"
    results.write_bytes(_bad_files(tmp_path)[kind].read_bytes())
    code = run_table(tmp_path, lambda: [], lambda r: "", ["--render-only"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"fedlab: error: {results}: ")
    assert "git checkout" in err[0]


def test_a_damaged_sweep_identity_is_one_line(tmp_path):
    from fedlab.sweep import _same_identity

    (tmp_path / "identity.json").write_text('{"base": "abc", "gr')
    with pytest.raises(ConfigError) as e:
        _same_identity(tmp_path, {"base": "abc"})
    assert _one_line(e.value).startswith(f"{tmp_path / 'identity.json'}: is not valid JSON") and "--fresh" in str(e.value)


def test_a_damaged_mlflow_store_is_one_line(tmp_path):
    from fedlab.tracking import setup_mlflow

    db = tmp_path / "mlflow.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError) as e:
        setup_mlflow(f"sqlite:///{db}", str(tmp_path / "artifacts"), "fedlab")
    assert _one_line(e.value).startswith(f"tracking.uri: sqlite:///{db}: is not an MLflow store")


def test_damaged_run_folder_markers_are_said_and_survived(tmp_path, capsys):
    from fedlab.experiment import _resume_run_id
    from fedlab.runtime.federation import _logged_round

    (tmp_path / "mlflow_run_id").write_text("\x00garbage")
    assert _resume_run_id(tmp_path / "mlflow_run_id") is None
    (tmp_path / "mlflow_run_id").write_text("0123456789abcdef0123456789abcdef")
    assert _resume_run_id(tmp_path / "mlflow_run_id") == "0123456789abcdef0123456789abcdef"
    (tmp_path / "logged_round").write_text("3x")
    assert _logged_round(tmp_path / "logged_round") == -1
    (tmp_path / "logged_round").write_text("3\n")
    assert _logged_round(tmp_path / "logged_round") == 3
    err = capsys.readouterr().err
    assert "does not hold an MLflow run id" in err and "logged_round is damaged" in err


def test_a_kill_while_the_round_marker_is_written_leaves_the_last_rounds_marker(tmp_path, monkeypatch):
    """`logged_round` is replaced, not rewritten in place: a process killed mid-write (here: the write truncates
    its file, then dies) leaves the previous round's marker, so a resume does not log every round again."""
    from pathlib import Path

    from fedlab.runtime.evaluation import RunLog, _logged_round

    class Tracker:
        def __init__(self):
            self.steps = []

        def log_metrics(self, metrics, step):
            self.steps.append(step)

    log = RunLog(load_config(None, []), Tracker(), tmp_path, history=None)
    log.round({"round": 0, "acc/mean": 0.5})
    assert _logged_round(tmp_path / "logged_round") == 0
    write_text = Path.write_text

    def killed(path, text, *a, **k):
        write_text(path, "")                     # opened for writing (truncated), then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        log.round({"round": 1, "acc/mean": 0.6})
    monkeypatch.undo()
    assert _logged_round(tmp_path / "logged_round") == 0
    assert log.tracker.steps == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logged_round"]     # no temporary file left beside it


def test_resuming_into_a_store_without_the_run_is_one_line(tmp_path):
    from fedlab.tracking import make_tracker

    cfg = load_config(ROOT / "experiments/defaults.yaml", [f"tracking.uri=sqlite:///{tmp_path}/m.db",
                                                           f"tracking.artifact_root={tmp_path}/a"])
    with pytest.raises(ConfigError) as e:
        make_tracker(cfg, run_id="0123456789abcdef0123456789abcdef")
    assert _one_line(e.value).startswith("resume: the run's folder names MLflow run 0123456789abcdef")


@pytest.mark.parametrize("damage", ["weights", "meta"])
def test_a_damaged_zoo_cache_is_rebuilt_with_a_line(damage, tmp_path, monkeypatch, capsys):
    """A model built under FEDLAB_HOME records its files' sha256; a damaged file (or meta.json) is found at
    the next load (once per process and file state) and the copy is rebuilt — to the same weights."""
    from fedlab.models import zoo

    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    monkeypatch.setattr(zoo, "shipped_current", lambda name, world_seed=0: False)     # as for an unshipped recipe
    out = zoo.build("pico-llama", progress=False)
    meta = zoo.cache_meta("pico-llama")
    assert "model.safetensors" in meta["files"] and zoo.is_cached("pico-llama")
    target = out / ("model.safetensors" if damage == "weights" else "meta.json")
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    assert not zoo.is_cached("pico-llama")
    assert "is damaged" in capsys.readouterr().err
    zoo.build("pico-llama", progress=False)
    assert zoo.is_cached("pico-llama") and zoo.cache_meta("pico-llama")["weights_sha256"] == meta["weights_sha256"]
