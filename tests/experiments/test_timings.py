"""The run and build times docs/getting-started.md shows are written from the records and the zoo's manifest."""
import json

from fedlab.evidence import summary, timings
from fedlab.evidence.claims import block_markers
from fedlab.evidence.records import ROOT


def _key(yaml, seed):
    from fedlab.config import load_config
    from fedlab.runtime.federation import run_key

    return run_key(load_config(yaml, [f"seed={seed}"]))


def test_a_shipped_yamls_run_times_are_those_of_the_records_its_config_made(tmp_path):
    from fedlab import numerics

    toy = tmp_path / "experiments" / "toy"
    toy.mkdir(parents=True)
    (toy / "a.yaml").write_text("method: {name: zeroshot}\n")
    (toy / "b.yaml").write_text("method: {name: zeroshot}\nfederation: {rounds: 3}\n")
    ref = next(f for f, kind in numerics.measured_fingerprints().items() if kind == numerics.REFERENCE_KIND)
    rec = lambda key, seed, h, s, env=None: {"key": key, "seed": seed, "config_hash": h, "seconds": s,  # noqa: E731
                                              "final": {}, "environment": env or {}}
    a0, a1 = _key(toy / "a.yaml", 0), _key(toy / "a.yaml", 1)
    records = {"r@seed0": rec("r", 0, a0, 10.0), "r@seed1": rec("r", 1, a1, 30.0, {"numerics_fingerprint": ref}),
               "q@seed1": rec("q", 1, a0, 500.0),        # seed 0's config run at seed 1: not what a.yaml runs there
               "o@seed0": rec("o", 0, "another", 999.0),   # another config
               "p@seed7": rec("p", 7, _key(toy / "a.yaml", 7), 800.0)}     # a seed the tables do not make
    (toy / "results.json").write_text(json.dumps(records))
    lines = timings.run_lines(tmp_path)
    assert lines[2] == ("| `fedlab run experiments/toy/a.yaml` | 2 | 20 (10–30) | AMD EPYC (the reference) × 1; "
                        "numerics of no measured kind × 1 | `r` |")
    assert len(lines) == 5 and lines[-1].endswith("so no run time is recorded for them: `experiments/toy/b.yaml`.")
    # a record's seconds alone make no row: one without them is left out
    records["r@seed0"]["seconds"] = None
    (toy / "results.json").write_text(json.dumps(records))
    assert timings.run_lines(tmp_path)[2].startswith("| `fedlab run experiments/toy/a.yaml` | 1 | 30 (30–30) |")


def test_the_zoo_build_times_are_the_shipped_manifests_slowest_first(tmp_path):
    shipped = tmp_path / "fedlab" / "models" / "shipped"
    shipped.mkdir(parents=True)
    on = {"cpu": "AMD EPYC (AVX2)", "capability": "AVX2", "numerics": "pinned", "threads": 1}
    (shipped / "manifest.json").write_text(json.dumps({
        "pico-a": {"files": {}, "params": 1000, "build_seconds": 5.5, "built_on": on},
        "tiny-b": {"files": {}, "params": 20, "build_seconds": 1234.0}}))
    assert timings.zoo_lines(tmp_path)[2:] == [
        "| tiny-b | 20 | 1,234 | not recorded |",
        "| pico-a | 1,000 | 5.5 | AMD EPYC (AVX2), pinned numerics, 1 thread(s) |"]


def test_fedlab_results_fills_the_getting_started_blocks_and_check_sees_an_edit(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "experiments").mkdir()          # no system, no shipped YAML
    page = tmp_path / "docs" / "getting-started.md"
    runs, zoo = block_markers(timings.RUNS), block_markers(timings.ZOO)
    page.write_text(f"# Start\n\n{runs[0]}\n| typed | 240 s |\n{runs[1]}\n\nmiddle\n\n{zoo[0]}\n{zoo[1]}\nend\n")
    assert page in summary.stale(tmp_path)
    summary.write(tmp_path)
    assert page not in summary.stale(tmp_path)
    text = page.read_text()
    assert "typed" not in text and text.startswith(f"# Start\n\n{runs[0]}\n| run |") and text.endswith(
        f"{zoo[1]}\nend\n") and "\n\nmiddle\n\n" in text
    page.write_text(text.replace("| model |", "| the model |"))
    assert page in summary.stale(tmp_path)


def test_the_shipped_getting_started_page_shows_what_the_records_and_manifest_say():
    """`fedlab results` was run after the last record landed (`fedlab results --check` says the same)."""
    page = ROOT / timings.PAGE
    for name in (timings.RUNS, timings.ZOO):
        assert block_markers(name)[0] in page.read_text()
    assert timings.pages(ROOT) == {page: page.read_text()}
