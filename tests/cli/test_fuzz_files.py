"""No traceback for a damaged file of any kind fedlab reads: hypothesis damages a valid file — empties it, cuts it
short, replaces it with random bytes, puts a byte that is not UTF-8 in it, puts a folder in its place or removes
it — and the command line's entry point runs in-process on it. Every outcome is exit 0 (the damage was harmless,
or fedlab repaired it: a zoo copy is rebuilt) or exit 2 with one `fedlab: error:` line; a traceback, an internal
error (exit 1) or a hang fails the test. The kinds: a table's records (`results.json`, rendered or merged by
a table script's entry point), local data rows (`data.hf_dir`), a public set
(`data.public_path`), a pinned Floe profile (`method.profile`), a run's checkpoint (`resume=true`), an MLflow
store (`fedlab report`) and an entry of the evaluation cache under $FEDLAB_HOME (the zoo's own files are checked
against their manifest by `fedlab zoo verify`, and a damaged copy built here is rebuilt: test_shipped_zoo). A short seeded budget runs in the default
tier (the fast kinds); `pytest -m slow` runs every kind with a long one."""
from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_inputs import assert_clean, run_cli

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
DAMAGE = ["empty", "truncated", "random", "not_utf8", "folder", "missing"]
_COUNTER = itertools.count()
CASES: dict[str, int] = {}      # cases run per kind (hypothesis stops early where a kind has fewer distinct ones)


@st.composite
def damaged(draw, valid: bytes):
    """(how, bytes or None): the damage and the file's new content (None: a folder, or no file)."""
    how = draw(st.sampled_from(DAMAGE))
    if how == "empty":
        return how, b""
    if how == "truncated":
        return how, valid[: draw(st.integers(1, max(1, len(valid) - 1)))]
    if how == "random":
        return how, draw(st.binary(min_size=1, max_size=200))
    if how == "not_utf8":
        at = draw(st.integers(0, len(valid)))
        return how, valid[:at] + b"\xff\xfe" + valid[at:]
    return how, None


def place(path: Path, damage) -> None:
    how, content = damage
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "folder":
        path.mkdir()
        (path / "inside").write_text("x")
    elif how != "missing":
        path.write_bytes(content)


def _sst2_rows(n: int) -> bytes:
    words = ["good", "bad", "fine", "awful"]
    return "".join(json.dumps({"sentence": f"it was {words[i % 4]}", "label": int(i % 4 == 0 or i % 4 == 2)}) + "\n"
                   for i in range(n)).encode()


def data_rows(case: Path, draw):
    (case / "hf" / "sst2").mkdir(parents=True)
    (case / "hf" / "sst2" / "test.jsonl").write_bytes(_sst2_rows(8))
    place(case / "hf" / "sst2" / "train.jsonl", draw(damaged(_sst2_rows(8))))
    return ["data", "describe", str(ROOT / "experiments/defaults.yaml"), "data.source=hf:sst2",
            f"data.hf_dir={case / 'hf'}"]


def public_set(case: Path, draw):
    valid = "".join(json.dumps({"prompt": f"question {i}?", "target": f"answer {i}"}) + "\n" for i in range(6)).encode()
    place(case / "public.jsonl", draw(damaged(valid)))
    return ["data", "describe", str(ROOT / "experiments/defaults.yaml"), "data.public_source=instructions",
            f"data.public_path={case / 'public.jsonl'}"]


PROFILE = {"ranks": [2, 4], "memory_mb": {"2": 10.0, "4": 20.0}, "latency_s": {"2": 0.01, "4": 0.02}}


def profile(case: Path, draw):
    place(case / "profile.json", draw(damaged(json.dumps(PROFILE).encode())))
    return ["run", str(ROOT / "experiments/defaults.yaml"), *PICO, "method.name=floe", "method.ranks=[2,4]",
            "data.num_clients=2", "data.tasks=[recall]", "federation.rounds=1", "method.router=false",
            "method.deadline=1", f"method.profile={case / 'profile.json'}", "tracking.enabled=false",
            f"output_dir={case / 'runs'}"]


CHECKPOINT_RUN = [*PICO, "method.name=fedavg", "data.num_clients=2", "data.tasks=[recall]", "federation.rounds=1",
                  "tracking.enabled=false"]


def checkpoint(case: Path, draw):
    from fedlab.config import load_config
    from fedlab.runtime.federation import run_dir

    argv = ["run", str(ROOT / "experiments/defaults.yaml"), *CHECKPOINT_RUN, f"output_dir={case / 'runs'}",
            "resume=true"]
    folder = run_dir(load_config(ROOT / "experiments/defaults.yaml", argv[2:]))
    valid = _valid_checkpoint()
    place(folder / "checkpoint.pt", draw(damaged(valid)))
    return argv


_CHECKPOINT: dict = {}


def _valid_checkpoint() -> bytes:
    """A real run's checkpoint, made once per session."""
    if "bytes" not in _CHECKPOINT:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            code, err = run_cli(["run", str(ROOT / "experiments/defaults.yaml"), *CHECKPOINT_RUN,
                                 f"output_dir={tmp}/runs"], Path(tmp))
            assert code == 0, err
            _CHECKPOINT["bytes"] = next(Path(tmp, "runs").rglob("checkpoint.pt")).read_bytes()
    return _CHECKPOINT["bytes"]


def store(case: Path, draw):
    import sqlite3

    valid_db = case / "valid.db"
    sqlite3.connect(valid_db).execute("create table t (x int)").connection.commit()
    place(case / "mlflow.db", draw(damaged(valid_db.read_bytes())))
    return ["report", "--uri", f"sqlite:///{case / 'mlflow.db'}", "--artifact-root", str(case / "art"),
            "--experiment", "fuzz"]


def eval_cache(case: Path, draw):
    """A fresh $FEDLAB_HOME whose evaluation cache holds a run's scores, one entry damaged; the run again."""
    home = case / "home"
    os.environ["FEDLAB_HOME"] = str(home)
    argv = ["run", str(ROOT / "experiments/defaults.yaml"), *CHECKPOINT_RUN, f"output_dir={case / 'runs'}"]
    code, err = run_cli(argv, case)
    assert code == 0, err
    entries = sorted((home / "eval_cache").rglob("*.json"))
    target = entries[draw(st.integers(0, len(entries) - 1))]
    place(target, draw(damaged(target.read_bytes())))
    return argv


def records(case: Path, draw):
    """A table's records (`results.json`, two real ones of the Floe table) damaged; the table script rendered
    from them (`--render-only`), or another clone's records merged in (`--merge-from`)."""
    from fedlab.evidence.runner import Planned, run_table

    source = json.loads((ROOT / "experiments" / "floe" / "results.json").read_text())
    keys = [k for k in source if k != "_meta"][:2]
    valid = json.dumps({k: source[k] for k in keys}, indent=1).encode()
    merge = draw(st.booleans())
    place(case / ("other.json" if merge else "results.json"), draw(damaged(valid)))
    plan = [Planned(k.split("@")[0], None, (), "row", "t") for k in keys]
    argv = ["--render-only", "--allow-dirty"] + (["--merge-from", str(case / "other.json")] if merge else [])
    return lambda: run_table(case, lambda: plan, lambda r: "rendered", argv)


KINDS = {"records": records, "data_rows": data_rows, "public_set": public_set, "store": store, "profile": profile,
         "checkpoint": checkpoint, "eval_cache": eval_cache}
FAST = ["records", "data_rows", "public_set", "profile"]      # the store (MLflow migrates a new database: ~15 s a case) and the run kinds are slow


def run_entry(entry, cwd: Path) -> tuple[int, str]:
    """A table script's entry point in-process: (exit code, stderr)."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = entry()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return code, err.getvalue()


def fuzz_files(kind: str, examples: int, tmp_path: Path) -> None:
    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data())
    def one(data):
        CASES[kind] = CASES.get(kind, 0) + 1
        case = tmp_path / f"case{next(_COUNTER)}"
        case.mkdir()
        home = os.environ.get("FEDLAB_HOME")
        try:
            argv = KINDS[kind](case, data.draw)
            code, err = run_cli(argv, case) if isinstance(argv, list) else run_entry(argv, case)
        finally:
            if home is not None:
                os.environ["FEDLAB_HOME"] = home
        assert_clean(code, err, (kind, argv))
    one()


@pytest.mark.parametrize("kind", FAST)
def test_damaged_files_end_cleanly(pico_zoo, tmp_path, kind):
    fuzz_files(kind, 6, tmp_path)


@pytest.mark.federation
@pytest.mark.slow     # every kind, 40 cases each (a few minutes: runs start on the slow kinds)
@pytest.mark.parametrize("kind", list(KINDS))
def test_damaged_files_end_cleanly_long(pico_zoo, tmp_path, kind):
    fuzz_files(kind, 40, tmp_path)
    print(f"[fuzz] files/{kind}: {CASES[kind]} cases, none failed")


def test_a_folder_in_place_of_an_eval_cache_entry_costs_a_rescore_not_the_evaluation(tmp_path, monkeypatch):
    """Found by the fuzzer: an entry that cannot be written (a folder in its place) failed every client's
    evaluation; the scores are now computed without the cache and the run ends as usual."""
    from fedlab.eval import cache

    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path / "home"))
    key = "ab" + "0" * 62
    (tmp_path / "home" / "eval_cache" / "ab" / f"{key}.json").mkdir(parents=True)
    cache.store(key, {"acc/recall": 0.5})           # no exception
    assert cache.load(key) is None
    (tmp_path / "home" / "eval_cache" / "ab" / f"{key}.json").rmdir()
    (tmp_path / "home" / "eval_cache" / "ab" / f"{key}.json").write_text("[1, 2]")      # JSON, not scores
    assert cache.load(key) is None


def test_local_data_with_fewer_rows_than_clients_is_one_line(tmp_path):
    """Found by the fuzzer: a data file cut short to fewer rows than clients ended as an internal error in
    `fedlab data describe`; the partitioner's check is a config error naming the key and the counts."""
    (tmp_path / "hf" / "sst2").mkdir(parents=True)
    for split in ("train", "test"):
        (tmp_path / "hf" / "sst2" / f"{split}.jsonl").write_bytes(_sst2_rows(3))
    code, err = run_cli(["data", "describe", str(ROOT / "experiments/defaults.yaml"), "data.source=hf:sst2",
                         f"data.hf_dir={tmp_path / 'hf'}", "data.num_clients=5", "data.partition=iid"], tmp_path)
    assert code == 2 and "fedlab: error: data.num_clients: 5 clients but 3 training samples" in err, err
