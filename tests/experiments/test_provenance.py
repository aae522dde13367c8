"""Provenance: which source tree a record came from, a dirty tree refused by table scripts unless its
diff is kept, and records that are stale when the numerics they were computed with differ."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import PICO
from fedlab.evidence.provenance import affects_numbers, diff_sha256, git_state


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture()
def repo(tmp_path):
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "pkg" / "a.py").write_text("x = 1\n")
    (r / "README.md").write_text("# r\n")
    _git(r, "init", "-q")
    _git(r, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(r, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return r


def test_a_tree_is_dirty_only_where_a_file_can_change_numbers(repo):
    s = git_state(repo)
    assert s["clean"] is True and len(s["commit"]) == 40 and s["diff"] == ""
    (repo / "README.md").write_text("# r, restated\n")                 # documentation
    (repo / "results.json").write_text("{}")                          # a table's own records
    (repo / "pkg" / "RESULTS.md").write_text("| a |")
    assert git_state(repo)["clean"] is True
    (repo / "pkg" / "a.py").write_text("x = 2\n")                     # code
    (repo / "pkg" / "new.py").write_text("y = 3\n")                   # untracked code
    s = git_state(repo)
    assert s["clean"] is False and s["changed"] == ["pkg/a.py", "pkg/new.py"]
    assert "-x = 1\n+x = 2" in s["diff"] and "+y = 3" in s["diff"] and "README" not in s["diff"]
    assert affects_numbers("experiments/x/run.yaml") and not affects_numbers("experiments/x/results.json")


def test_outside_a_git_checkout_there_is_no_commit(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "clean": None, "changed": [], "diff": ""}


def _plan(tmp_path):
    from fedlab.evidence.runner import Planned

    return [Planned("t/zeroshot", None, (*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]",
                                         "method.name=zeroshot", "tracking.enabled=false",
                                         f"output_dir={tmp_path}/runs"), "zero-shot", "t")]


DIRTY = {"commit": "c" * 40, "clean": False, "changed": ["fedlab/x.py"], "diff": "--- a/fedlab/x.py\n+++ b/x\n"}


@pytest.mark.federation
def test_a_table_refuses_a_dirty_tree_and_keeps_the_diff_when_allowed(pico_zoo, tmp_path, monkeypatch, capsys):
    from fedlab.evidence import provenance
    from fedlab.evidence.runner import DirtyTree, Results, execute, run_table

    monkeypatch.setattr(provenance, "git_state", lambda root=provenance.ROOT: dict(DIRTY))
    results = Results(tmp_path / "results.json")
    with pytest.raises(DirtyTree, match=r"uncommitted changes to 1 file\(s\) .* \(fedlab/x.py\); commit them first"):
        execute(_plan(tmp_path), results, [0], progress=False)
    assert run_table(tmp_path, lambda: _plan(tmp_path), lambda r: "", ["--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-dirty" in err and not (tmp_path / "results.json").exists()
    assert execute(_plan(tmp_path), results, [0], progress=False, allow_dirty=True) == 1
    rec = json.loads((tmp_path / "results.json").read_text())["t/zeroshot@seed0"]
    sha = diff_sha256(DIRTY["diff"])
    assert rec["git"] == "c" * 40 + "+dirty" and rec["environment"]["diff_sha256"] == sha
    assert (tmp_path / rec["diff"]).read_text() == DIRTY["diff"] and rec["diff"] == f"diffs/{sha[:16]}.patch"


def test_a_table_in_another_fedlab_checkout_is_refused(pico_zoo, repo, tmp_path, capsys, monkeypatch):
    """A table script in one fedlab checkout run with another checkout's fedlab imported would record the imported
    checkout's commit beside the other's plan and YAMLs: refused, even with --allow-dirty."""
    from fedlab.evidence.provenance import foreign_checkout
    from fedlab.evidence.runner import run_table

    folder = repo / "experiments" / "t"
    folder.mkdir(parents=True)
    assert foreign_checkout(folder) is None                       # a git checkout, but not fedlab's
    (repo / "fedlab").mkdir()
    (repo / "fedlab" / "__init__.py").write_text("")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "fedlab")
    assert foreign_checkout(folder) == repo.resolve()
    assert foreign_checkout(folder / "not-yet") == repo.resolve()  # a folder a table would create
    assert foreign_checkout(folder, root=repo) is None            # the checkout fedlab is imported from
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(repo)                                       # git's empty answer must not read as the cwd
    assert foreign_checkout(plain) is None                        # not a git checkout
    # a `git worktree add` of the same repository is another checkout: its folder is refused under the first
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    in_wt = tmp_path / "wt" / "experiments" / "t"
    in_wt.mkdir(parents=True)
    assert foreign_checkout(in_wt, root=repo) == (tmp_path / "wt").resolve()
    assert foreign_checkout(in_wt, root=tmp_path / "wt") is None
    for flags in ([], ["--allow-dirty"]):
        assert run_table(folder, lambda: _plan(tmp_path), lambda r: "", ["--seeds", "0", *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"PYTHONPATH={repo.resolve()}" in err and "imports fedlab from" in err
    assert not (folder / "results.json").exists()


@pytest.mark.federation
def test_a_record_of_other_numerics_is_stale(pico_zoo, tmp_path, capsys):
    from fedlab.evidence.records import stale_numerics
    from fedlab.evidence.runner import Results, execute

    results = Results(tmp_path / "results.json")
    assert execute(_plan(tmp_path), results, [0], progress=False, allow_dirty=True) == 1
    rec = results.records["t/zeroshot@seed0"]
    assert not stale_numerics(rec)
    assert execute(_plan(tmp_path), results, [0], progress=False, allow_dirty=True) == 0
    rec["environment"]["numerics_fingerprint"] = rec["environment"]["numerics_fingerprint"].replace("AVX2", "AVX512")
    assert stale_numerics(rec) and _plan(tmp_path)[0].key in results.stale(_plan(tmp_path))
    # stale only by numerics, it still measures the row's config: † but not outdated (its claims keep a verdict)
    stale, old = results.stale_and_outdated(_plan(tmp_path))
    assert stale == {"t/zeroshot"} and old == set() == results.outdated(_plan(tmp_path))
    from fedlab.config import ConfigError

    with pytest.raises(ConfigError, match="1 of the 1 run.* would replace records made with other numerics .* pass "
                                          "--replace-other-numerics"):
        execute(_plan(tmp_path), results, [0], progress=False, allow_dirty=True)
    assert "AVX512" in results.records["t/zeroshot@seed0"]["environment"]["numerics_fingerprint"]   # kept
    capsys.readouterr()
    assert execute(_plan(tmp_path), results, [0], progress=True, allow_dirty=True, replace_other_numerics=True) == 1
    assert "[fedlab] table: 1 of them replace records made with other numerics" in capsys.readouterr().err
    assert not stale_numerics(results.records["t/zeroshot@seed0"])
    del results.records["t/zeroshot@seed0"]["environment"]                    # made before fedlab recorded it
    assert stale_numerics(results.records["t/zeroshot@seed0"])


@pytest.mark.federation
def test_nothing_runs_while_records_are_judged_as_the_reference_kind(pico_zoo, tmp_path, monkeypatch):
    from fedlab.config import ConfigError
    from fedlab.evidence.runner import Results, execute

    results = Results(tmp_path / "results.json")
    monkeypatch.setenv("FEDLAB_JUDGE_NUMERICS", "reference")
    with pytest.raises(ConfigError, match=r"renders pages .* and runs nothing \(1 run\(s\) to make here\)"):
        execute(_plan(tmp_path), results, [0], progress=False, allow_dirty=True)
    assert results.records == {}


@pytest.mark.federation
def test_a_run_tags_its_environment_in_mlflow(pico_zoo, tmp_path, tracking_overrides):
    import mlflow

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(None, [*PICO, "data.num_clients=2", "data.tasks=[recall]", "method.name=zeroshot",
                             *tracking_overrides])
    h = run_experiment(cfg, progress=False)
    tags = mlflow.MlflowClient().get_run(h.run_id).data.tags
    assert tags["fedlab.env.numerics"] == "pinned" and tags["fedlab.env.capability"] == "AVX2"
    assert tags["fedlab.env.threads"] == "1" and tags["fedlab.env.torch"].startswith("2.")
    assert tags["fedlab.env.env.ATEN_CPU_CAPABILITY"] == "avx2" and tags["fedlab.env.clean"] in ("True", "False")
    assert h.environment["numerics_fingerprint"].startswith("AVX2|pinned|")
    from fedlab import idle_threads

    assert tags["fedlab.omp_wait"] == idle_threads.decision and "not decided" not in tags["fedlab.omp_wait"]


def test_no_committed_record_comes_from_a_dirty_tree_without_its_diff():
    """Every record in the repository's results.json files names a commit, and a record from a dirty tree names
    its kept diff (a patch whose sha256 is the one the record holds)."""
    from fedlab.evidence.provenance import ROOT

    bad = []
    for path in sorted((ROOT / "experiments").rglob("results.json")):
        for key, rec in json.loads(path.read_text()).items():
            if key == "_meta":
                continue
            git = rec.get("git") or ""
            if not git:
                bad.append(f"{path.parent.name}/{key}: no commit")
            elif git.endswith("+dirty"):
                patch = path.parent / rec.get("diff", "-")
                sha = (rec.get("environment") or {}).get("diff_sha256")
                if not patch.is_file() or diff_sha256(patch.read_text()) != sha:
                    bad.append(f"{path.parent.name}/{key}: dirty without its diff")
    assert not bad, f"{len(bad)} records: {bad[:5]}"


@pytest.mark.parametrize("system", ["coplms", "elsa", "fedmkt", "fedproxy", "floe"])
def test_a_tables_records_are_of_the_rows_its_script_plans(system):
    """A system's results.json holds records of planned rows only: a row dropped from the plan takes its records
    with it (git keeps them), so no page's record count or commit count reads a row that no table shows."""
    from fedlab.evidence.provenance import ROOT
    from fedlab.evidence.summary import load_table

    planned = {p.key for p in load_table(system).plan()}
    records = json.loads((ROOT / "experiments" / system / "results.json").read_text())
    extra = sorted({rec["key"] for key, rec in records.items() if key != "_meta"} - planned)
    assert not extra, f"{system}: records of rows no longer planned: {extra}"
