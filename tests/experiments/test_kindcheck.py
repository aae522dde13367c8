"""`make_tables.py --kind-check K`: records another machine kind made, re-made here and measured against their
row's spread across seeds (fedlab.evidence.kindcheck)."""
from __future__ import annotations

import math
import statistics

import pytest

from conftest import PICO
from fedlab import numerics
from fedlab.evidence.kindcheck import gaps, kind_check, line
from fedlab.evidence.runner import Planned, Results, execute


def test_each_metric_gap_is_measured_in_its_rows_between_seed_sd():
    record = {"final": {"a": 0.5, "b": 1.0, "c": 2.0, "d": 3.0, "server/time_x": 3.0, "nan": float("nan")}}
    now = {"a": 0.5, "b": 1.1, "c": 2.0, "d": 3.5, "server/time_x": 9.0, "nan": 1.0, "new": 1.0}
    row = [{"final": {"b": 1.0, "d": 3.0}}, {"final": {"b": 1.2, "d": 3.0}}, {"final": {"b": 0.8, "d": 3.0}}]
    got = gaps(record, now, row)
    # a, b, c, d compared (the wall clock, a NaN and a metric only the re-run logs left out); a and c equal; d's
    # row does not vary, so it has no ratio; b: 0.1 over the SD of (1.0, 1.2, 0.8), 0.2
    assert (got["metrics"], got["equal"], got["worst"]) == (4, 2, "b")
    assert math.isclose(got["z_max"], 0.5) and math.isclose(got["z_median"], 0.5) and got["z"] == {"b": 0.5}
    assert got["headline"] == {}
    assert gaps({"final": {"llm/acc/mean": 0.5}}, {"llm/acc/mean": 0.6}, [])["headline"] == {"llm/acc/mean": [0.5, 0.6]}
    assert gaps(record, dict(record["final"]), row)["z_max"] is None


def test_the_header_line_sums_the_pairs(tmp_path):
    r = Results(tmp_path / "results.json")
    assert line(r) == ""
    r.meta["kind_check"] = {"commit": "a" * 40, "date": "DAY", "kind": "Intel Xeon (AVX-512)", "pairs": [
        {"key": "t/x", "seed": 0, "made_on": numerics.REFERENCE_KIND, "metrics": 4, "equal": 1, "z_median": 0.1,
         "z_max": 0.3, "worst": "acc/mean", "z": {"acc/mean": 0.3}, "headline": {"acc/mean": [0.5, 0.51]}},
        {"key": "t/y", "seed": 2, "made_on": numerics.REFERENCE_KIND, "metrics": 3, "equal": 3, "z_median": None,
         "z_max": None, "worst": None, "z": {}, "headline": {"acc/mean": [0.5, 0.5]}},
        {"key": "t/z", "seed": 1, "made_on": numerics.REFERENCE_KIND, "failed": "ValueError: x"}]}
    assert line(r) == (f"Kind check: 3 (row, seed) pairs made on {numerics.REFERENCE_KIND} re-made on Intel Xeon "
                       "(AVX-512) at aaaaaaa on DAY: 4 of 7 final metrics equal bit for bit; each pair's "
                       "largest gap, over its row's between-seed SD: median 0.30, largest 0.30; each pair's largest "
                       "mean-accuracy gap over its row's between-seed SD: median 0.15, largest 0.30 (0 where equal or "
                       "the row's seeds agree); 1 re-run(s) failed.")


@pytest.mark.federation
def test_a_record_of_another_kind_is_re_made_here_and_measured(pico_zoo, tmp_path):
    plan = [Planned("t/zeroshot", None, (*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]",
                                         "method.name=zeroshot", "tracking.enabled=false",
                                         f"output_dir={tmp_path}/runs"), "zero-shot", "t")]
    results = Results(tmp_path / "results.json")
    assert execute(plan, results, [0, 1], progress=False, allow_dirty=True) == 2
    with pytest.raises(ValueError, match="no current record made on another measured kind"):
        kind_check(results, plan, 1, seed=0, progress=False)
    here = numerics.current_fingerprint()
    other = next(f for f in numerics.measured_fingerprints() if f != here)
    rec = results.records["t/zeroshot@seed0"]
    rec["environment"]["numerics_fingerprint"] = other       # as if the other kind had made it, one point off
    rec["final"]["acc/mean"] += 0.01
    assert results.why_stale(plan[0], rec) is None                              # another kind's record is current
    out = kind_check(results, plan, 5, seed=0, progress=False)
    (pair,) = out["pairs"]                                                      # seed 1 is this kind's: not drawn
    assert (pair["key"], pair["seed"], pair["made_on"]) == ("t/zeroshot", 0, numerics.kind_of(rec["environment"]))
    assert pair["worst"] == "acc/mean" and pair["equal"] == pair["metrics"] - 1
    assert pair["headline"]["acc/mean"][0] == rec["final"]["acc/mean"]
    spread = statistics.stdev([rec["final"]["acc/mean"], results.records["t/zeroshot@seed1"]["final"]["acc/mean"]])
    assert math.isclose(pair["z_max"], 0.01 / spread, rel_tol=1e-6)
    assert Results(tmp_path / "results.json").meta["kind_check"]["kind"] == numerics.this_kind()


def test_a_page_whose_records_two_kinds_made_says_whether_they_were_checked(tmp_path):
    from fedlab.evidence.page import kind_check_line

    by_kind = {kind: f for f, kind in numerics.measured_fingerprints().items()}
    r = Results(tmp_path / "results.json")
    for s, fp in enumerate([by_kind[numerics.REFERENCE_KIND], "unmeasured"]):
        r.records[f"a@seed{s}"] = {"key": "a", "seed": s, "environment": {"numerics_fingerprint": fp}}
    assert kind_check_line(r) == ""                                  # one measured kind (and unmeasured numerics)
    r.records["b@seed0"] = {"key": "b", "seed": 0, "environment": {"numerics_fingerprint":
                                                                    by_kind["Intel Xeon (AVX-512)"]}}
    assert kind_check_line(r).startswith("Kind check: none yet (two machine kinds made these records")
    assert kind_check_line(r, {"a"}) == ""                            # the rows of the plan only
    r.meta["kind_check"] = {"commit": "a" * 40, "date": "DAY", "kind": "Intel Xeon (AVX-512)", "pairs": [
        {"key": "a", "seed": 0, "made_on": numerics.REFERENCE_KIND, "metrics": 2, "equal": 2, "z_median": None,
         "z_max": None, "worst": None}]}
    assert kind_check_line(r) == line(r) and line(r).endswith("2 of 2 final metrics equal bit for bit.")
