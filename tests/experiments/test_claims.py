"""fedlab.evidence.claims and verdicts: a paper's claim judged on hand-built records (paired t-interval over
seeds), behind its control, with the one vocabulary."""
import pytest

from fedlab.evidence import verdicts as V
from fedlab.evidence.claims import (
    Claim,
    assess,
    block_markers,
    check_claim,
    claims_table,
    differences_table,
    write_block,
)
from fedlab.evidence.controls import Control, above_chance, above_zero_shot, check, controls_table
from fedlab.evidence.records import Results


def results(tmp_path, rows: dict[str, list[float]], shares: dict[str, list[float]] | None = None) -> Results:
    r = Results(tmp_path / "results.json")
    for key, accs in rows.items():
        for seed, acc in enumerate(accs):
            final = {"acc": acc, "acc/task_t": acc}
            if shares and key in shares:
                final["top/task_t"] = shares[key][seed]
            r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": final, "zero": {"acc": 0.1}}
    return r


acc = lambda rec: rec["final"]["acc"]
# a control on row "ref" that holds when ref's accuracy on task t is at least 0.5 in every seed
REF = Control("ref learns", ("ref",), ("t",), lambda rec, t: rec["final"]["acc"], lambda rec, t: 0.5, "0.5")


def claim(text, a, b, paper="-", **kw):
    kw.setdefault("control", REF)
    return Claim(text, "T1", paper, a, b, acc, **kw)


def test_verdicts_follow_the_paired_interval_and_the_papers_effect(tmp_path):
    r = results(tmp_path, {"a": [0.60, 0.62, 0.61], "b": [0.50, 0.53, 0.51], "c": [0.60, 0.50, 0.70],
                           "d": [0.61, 0.63, 0.62], "ref": [0.9, 0.9, 0.9]})
    # a − b = +10, +9, +10 points: mean 9.67, half-width t(0.975, 2)·s/√3 = 4.303·0.577/1.732 = 1.43
    ours, verdict = check_claim(r, claim("a above b", "a", "b", "x vs y (+9.0)"))
    assert ours == "+9.7 ± 1.4 pts (3 seeds)" and verdict == "reproduced"
    # the paper's effect beyond the interval: smaller than the paper's; inside 0..lo: larger than the paper's
    assert check_claim(r, claim("a above b", "a", "b", "x vs y (+15.0)"))[1] == f"{V.SMALLER} (paper +15.0)"
    assert check_claim(r, claim("a above b", "a", "b", "x vs y (+2.0)"))[1] == f"{V.LARGER} (paper +2.0)"
    assert check_claim(r, claim("a above b", "a", "b"))[1] == "reproduced (sign only)"
    assert check_claim(r, claim("b above a", "b", "a", "x vs y (+3.0)"))[1] == "contradicted"
    assert check_claim(r, claim("c above a", "c", "a"))[1].startswith("inconclusive (excludes < ")
    # comparable (tolerance 2 points): a is 1 point below d, 9.7 ± 1.4 above b, c's interval is wide
    assert check_claim(r, claim("a ≈ d", "a", "d", at_least=True))[1] == "reproduced (within 2)"
    assert check_claim(r, claim("b ≈ a", "b", "a", at_least=True))[1] == "contradicted (more than 2 below)"
    assert check_claim(r, claim("a ≈ c", "a", "c", at_least=True))[1].startswith("underpowered")
    # the same run's round 0 as b; a missing row; one seed
    assert check_claim(r, claim("a over its zero-shot", "a", "a", fn_b=lambda rec: rec["zero"]["acc"]))[1] == (
        "reproduced (sign only)")
    assert check_claim(r, claim("x", "a", "missing")) == ("-", "not run yet")
    one = results(tmp_path, {"a": [0.6], "b": [0.5], "ref": [0.9]})
    assert check_claim(one, claim("x", "a", "b")) == ("-", "too few seeds (1; a verdict needs 3)")


def test_a_negative_paper_effect_is_judged_on_its_own_side():
    # the paper says a − b = −3.7: an interval [−10, −6] is larger than the paper's, [−2, −1] smaller, [+1, +3]
    # contradicts it
    assert V.directional(-8.0, 2.0, 3.0, -3.7).word == V.LARGER
    assert V.directional(-1.5, 0.5, 1.0, -3.7).word == V.SMALLER
    assert V.directional(2.0, 1.0, 2.0, -3.7).word == V.CONTRADICTED
    assert V.directional(-3.0, 2.0, 3.0, -3.7).word == V.REPRODUCED


def test_a_claim_whose_control_fails_shows_its_difference_with_no_verdict(tmp_path):
    r = results(tmp_path, {"a": [0.60, 0.62, 0.61], "b": [0.50, 0.53, 0.51], "ref": [0.9, 0.4, 0.9]})
    a = assess(r, claim("a above b", "a", "b", "x vs y (+9.0)"))
    assert a.ours == "+9.7 ± 1.4 pts (3 seeds)" and str(a.verdict) == "no control (ref learns)"
    assert a.control_cell() == "ref learns: fails (t in seed 1)"
    # a claim that names no control is not judged either
    assert str(assess(r, claim("a above b", "a", "b", control=None)).verdict) == "no control (none declared)"
    # a control whose rows have no records yet
    missing = Control("other", ("nothing",), ("t",), REF.score, REF.bar, "0.5")
    assert str(assess(r, claim("a above b", "a", "b", control=missing)).verdict) == "no control (other not run)"


def test_controls_are_checked_per_row_task_and_seed(tmp_path):
    r = Results(tmp_path / "results.json")
    for s, (x, z) in enumerate([(0.70, 0.60), (0.61, 0.60), (0.50, 0.60)]):
        r.records[f"c@seed{s}"] = {"key": "c", "seed": s, "final": {"acc/task_u": x, "acc/task_v": 0.9},
                                   "zero": {"acc/task_u": z, "acc/task_v": 0.5}}
    zero = above_zero_shot("c learns", ["c"], ["u", "v"], lambda rec, t: rec["final"][f"acc/task_{t}"],
                           lambda rec, t: rec["zero"][f"acc/task_{t}"], 2.0)
    st = check(r, zero)
    # u: +10 clears zero-shot + 2, +1 and −10 do not; v clears it in every seed
    assert st.passed[("c", "u")] == [0] and st.failed[("c", "u")] == [1, 2] and not st.failed[("c", "v")]
    assert not st.holds and st.failing() == "u in seeds 1, 2"
    chance = above_chance("c above chance", ["c"], ["v"], lambda rec, t: rec["final"][f"acc/task_{t}"],
                          lambda t: 0.5, 25)
    assert check(r, chance).holds                       # 0.9 ≥ 0.5 + 0.25 in every seed
    assert check(r, zero.on(["v"])).holds and not check(r, zero.on(["u"])).holds
    row = controls_table(r, [zero])[2]
    assert row == "| c learns | `c` | zero-shot + 2 points | u 1/3 ✗; v 3/3 | fails: u in seeds 1, 2 |"


def test_collapse_is_named_beside_the_verdict(tmp_path):
    from fedlab.evidence.collapse import metric_shares

    r = results(tmp_path, {"a": [0.60, 0.62, 0.61], "b": [0.50, 0.53, 0.51], "ref": [0.9, 0.9, 0.9]},
                shares={"a": [0.6, 0.97, 0.5], "b": [0.5, 0.5, 0.5]})
    a = assess(r, claim("a above b", "a", "b", shares=metric_shares("acc/task_t")))
    assert a.collapse_words() == "a: collapse in seed 1 (t)"
    assert a.verdict_cell() == "reproduced (sign only); a: collapse in seed 1 (t)"
    r.records["b@seed2"]["final"].pop("top/task_t")            # a record made before shares were logged
    assert assess(r, claim("x", "a", "b", shares=metric_shares("acc/task_t"))).collapse_words() == (
        "a: collapse in seed 1 (t); b: collapse unknown")
    assert assess(r, claim("x", "a", "b")).collapse_words() == "collapse not checked"
    # a table cell carries the marker of the seeds it is made of
    assert r.final("a", "acc/task_t") == "0.610 ± 0.025 ⚠1/3" and r.final("b", "acc/task_t").endswith(" ◌")


def test_several_rows_average_per_seed(tmp_path):
    r = results(tmp_path, {"t1/a": [0.6, 0.7, 0.5], "t2/a": [0.8, 0.9, 0.7], "t1/b": [0.5, 0.6, 0.4],
                           "t2/b": [0.5, 0.6, 0.4], "ref": [0.9, 0.9, 0.9]})
    # per seed: a = 0.7, 0.8, 0.6; b = 0.5, 0.6, 0.4 → +20 every seed (no spread): reproduced
    ours, verdict = check_claim(r, claim("a", ("t1/a", "t2/a"), ("t1/b", "t2/b")))
    assert verdict == "reproduced (sign only)" and ours.startswith("+20.0 ± 0.0")


def test_block_is_replaced_in_place(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\ntext\n")
    r = results(tmp_path, {"a": [0.6, 0.62], "b": [0.5, 0.5], "ref": [0.9, 0.9]})
    write_block(readme, claims_table(r, [claim("a above b", "a", "b", "61 vs 50")]))
    write_block(readme, claims_table(r, [claim("a above b", "a", "b", "61 vs 50")]))
    text = readme.read_text()
    begin, end = block_markers("claims")
    assert text.count(begin) == 1 and text.count(end) == 1 and text.startswith("# Title\n\ntext\n")
    # differences +10, +12: sd 1.414, MDE at n = 2 is 11.55 sd = 16.3 points; 2 seeds give no verdict
    assert "| a above b | T1 | 61 vs 50 | +11.0 ± 12.7 pts (2 seeds) | 16.3 pts | ref learns: holds | too few seeds (2; " in text


def test_two_seeds_show_the_difference_but_give_no_verdict(tmp_path):
    # a − b = +40, +41: the 2-seed interval 40.5 ± 6.4 lies far above 0, yet one seed could carry it
    r = results(tmp_path, {"a": [0.90, 0.91], "b": [0.50, 0.50], "ref": [0.9, 0.9, 0.9]})
    ours, verdict = check_claim(r, claim("a above b", "a", "b"))
    assert ours == "+40.5 ± 6.4 pts (2 seeds)" and verdict == "too few seeds (2; a verdict needs 3)"
    assert check_claim(r, claim("a ≈ b", "a", "b", at_least=True))[1].startswith("too few seeds")
    r3 = results(tmp_path, {"a": [0.90, 0.91, 0.92], "b": [0.50, 0.50, 0.50], "ref": [0.9, 0.9, 0.9]})
    assert check_claim(r3, claim("a above b", "a", "b"))[1] == "reproduced (sign only)"
    # a paired-difference table holds the same rule in its last column
    rows = differences_table(r, [("a − b", "a", "acc", "b", "acc")], digits=1, scale=100)
    assert rows[2] == "| a − b | +40.5 ± 6.4 | 2 | 8.2 | 0.00786 | too few seeds |"          # p < 0.01, still none
    assert differences_table(r3, [("a − b", "a", "acc", "b", "acc")], digits=1, scale=100)[2].endswith("| yes |")


def test_mde_of_a_paired_t_test_matches_the_published_power_tables():
    from fedlab.evidence.stats import mde_paired, paired_difference

    # G*Power, paired t-test, two-sided α = 0.05, power 0.8: n = 10 needs d_z = 0.996, n = 30 needs 0.529
    assert abs(mde_paired(1.0, 10) - 0.996) < 1e-3 and abs(mde_paired(2.0, 30) - 2 * 0.529) < 2e-3
    # n = 2 (one degree of freedom): power 0.8 needs the χ²(1) 80 % quantile under (δ√2/t_.975,1)², δ ≈ 11.5 sd
    assert 11.4 < mde_paired(1.0, 2) < 11.7
    assert mde_paired(0.0, 3) == 0.0 and mde_paired(1.0, 1) != mde_paired(1.0, 1)        # nan for one pair
    d = paired_difference([0.3, 0.5, 0.4], [0.1, 0.2, 0.3])                               # diffs .2 .3 .1
    assert abs(d["sd"] - 0.1) < 1e-12 and abs(d["mde"] - 0.3264) < 1e-3


def test_a_paper_effect_below_the_mde_is_underpowered_and_a_detectable_one_inconclusive(tmp_path):
    r = results(tmp_path, {"a": [0.60, 0.50, 0.70], "b": [0.58, 0.56, 0.60], "ref": [0.9, 0.9, 0.9]})
    # a − b = +2, −6, +10 points: mean 2, sd 8, MDE 3.264·8 = 26.1; interval 2 ± 19.9
    ours, verdict = check_claim(r, claim("a above b", "a", "b", "60 vs 58 (+1.9)"))
    assert ours == "+2.0 ± 19.9 pts (3 seeds)" and verdict == "underpowered (paper +1.9 < MDE 26.1)"
    verdict = check_claim(r, claim("a above b", "a", "b", "90 vs 60 (+30.0)"))[1]
    assert verdict == "inconclusive (excludes < -17.9 and > +21.9: the paper's +30.0 is ruled out)"
    assert check_claim(r, claim("a above b", "a", "b", "x", effect=-27.0))[1] == (
        "inconclusive (excludes < -17.9 and > +21.9: the paper's -27.0 is ruled out)")
    assert Claim("x", "T", "60.9 vs 64.5 (−3.7)", "a", "b", acc).paper_effect() == -3.7
    assert Claim("x", "T", "no number at λ = 1 (λ = 0.1: +4.9)", "a", "b", acc).paper_effect() is None
    assert check_claim(r, claim("a ≈ b", "a", "b", at_least=True))[1].startswith("underpowered")


def test_a_claim_on_rows_another_config_made_is_stale(tmp_path):
    """Records made by another config than the script runs now (`Results.outdated`) give the verdict "stale", on
    either side of a claim and in the differences table; the same records unmarked give one."""
    r = results(tmp_path, {"a": [0.60, 0.62, 0.61], "b": [0.50, 0.53, 0.51], "c": [0.40, 0.42, 0.41],
                           "ref": [0.9, 0.9, 0.9]})
    c = claim("a above b", "a", "b")
    assert check_claim(r, c)[1] == "reproduced (sign only)"
    for side in ("a", "b"):
        row = claims_table(r, [c], outdated={side})[2]
        assert "+9.7 ± 1.4 pts (3 seeds)" in row and "| stale (records made by another config" in row
    both = claim("a and c above b", ("a", "c"), "b")      # a tuple side: any of its rows counts
    assert "| stale (" in claims_table(r, [both], outdated={"c"})[2]
    r.records = {k: {**v, "final": {"acc/mean": v["final"]["acc"]}} for k, v in r.records.items()}
    pair = [("a − b", "a", "acc/mean", "b", "acc/mean")]
    assert differences_table(r, pair)[2].endswith("| yes |")
    assert differences_table(r, pair, outdated={"b"})[2].endswith("| stale |")


def test_the_baselines_table_marks_records_another_config_made_stale(tmp_path):
    """experiments/baselines/make_table.py's paired differences take the outdated set from the render's one pass
    over the records: hand-made records name no config, so another config made them and no pair has a verdict."""
    from fedlab.evidence.summary import load_table

    mod = load_table("baselines")
    r = Results(tmp_path / "results.json")
    for s in range(3):
        for m, a in (("centralized", 0.8 + 0.01 * s), ("zeroshot", 0.5)):
            r.records[f"tiny/hetero/{m}@seed{s}"] = {"key": f"tiny/hetero/{m}", "seed": s, "seconds": 1,
                                                    "final": {"acc/mean": a}}
    row = next(line for line in mod.render(r).splitlines() if line.startswith("| centralized − zeroshot |"))
    assert row == "| centralized − zeroshot | +0.310 ± 0.025 | 3 | 0.033 | 0.000347 | stale |"


@pytest.mark.parametrize("word", [w for w, _ in V.VOCABULARY])
def test_every_verdict_word_has_its_meaning_in_the_legend(word):
    assert any(line.startswith(f"- *{word}*: ") for line in V.legend())


def two_task_results(tmp_path) -> Results:
    """Rows a, b and ref over tasks u and v, 3 seeds: ref learns v in every seed and u in seeds 0 and 2 only; a's
    round 0 ("zero") scores 0.5 on u and 0.65 on v; b answers one class on u in seed 0."""
    r = Results(tmp_path / "results.json")
    rows = {"a": {"u": [0.2, 0.2, 0.2], "v": [0.70, 0.72, 0.71]}, "b": {"u": [0.9, 0.9, 0.9], "v": [0.60, 0.61, 0.62]},
            "ref": {"u": [0.9, 0.1, 0.9], "v": [0.9, 0.9, 0.9]}}
    for key, by_task in rows.items():
        for seed in range(3):
            final = {f"acc/task_{t}": by_task[t][seed] for t in by_task}
            final |= {"top/task_u": 0.99 if (key, seed) == ("b", 0) else 0.5, "top/task_v": 0.5}
            r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": final,
                                              "zero": {"acc/task_u": 0.5, "acc/task_v": 0.65}}
    return r


def mean_over(tasks, which="final"):
    return lambda rec: sum(rec[which][f"acc/task_{t}"] for t in tasks) / len(tasks)


REF_UV = Control("ref", ("ref",), ("u", "v"), lambda rec, t: rec["final"][f"acc/task_{t}"], lambda rec, t: 0.5,
                 "0.5")
OVER = lambda ts: (mean_over(ts), None)


def test_a_claim_averaging_tasks_is_judged_on_the_tasks_its_control_learns_in_every_seed(tmp_path):
    from dataclasses import replace

    from fedlab.evidence.collapse import metric_shares

    r = two_task_results(tmp_path)
    whole = Claim("a above b", "T1", "x vs y (+10.0)", "a", "b", mean_over(("u", "v")), control=REF_UV)
    # one task's control failing in one seed leaves a claim that cannot be narrowed without a verdict
    assert str(assess(r, whole).verdict) == "no control (ref)"
    narrowable = Claim("a above b", "T1", "x vs y (+10.0)", "a", "b", mean_over(("u", "v")), control=REF_UV,
                       shares=metric_shares("acc/mean"), tasks=("u", "v"), over=OVER)
    got = assess(r, narrowable)
    # on v alone a − b = +10, +11, +9 points (on both tasks it would be −30): u is left out, v is judged, and b's
    # one-class answers on u leave the collapse check with it
    assert got.ours == "+10.0 ± 2.5 pts (3 seeds)" and got.verdict.word == V.REPRODUCED
    assert got.claim is narrowable and got.left_out == {"ref": {"u": "in seed 1"}} and got.judged_on == ("v",)
    assert got.control_cell() == "ref: fails u (left out)"
    assert got.verdict_cell() == "reproduced; judged on 1 of 2 tasks (v), left out as ref fails them: u in seed 1"
    assert assess(r, replace(narrowable, control=None)).collapse_words() == "b: collapse in seed 0 (u)"
    # a claim that averages v alone reads no collapse on u
    assert assess(r, replace(narrowable, control=None, tasks=("v",))).collapse_words() == ""
    # b read another way (a's own round 0) is narrowed with it: on v, a − zero = +5, +7, +6 points
    to_zero = Claim("a above its zero-shot", "T1", "-", "a", "a", mean_over(("u", "v")),
                    fn_b=mean_over(("u", "v"), "zero"), control=REF_UV, tasks=("u", "v"),
                    over=lambda ts: (mean_over(ts), mean_over(ts, "zero")))
    assert assess(r, to_zero).ours == "+6.0 ± 2.5 pts (3 seeds)"
    # a control that fails every task the claim averages leaves nothing to judge
    r.records["ref@seed0"]["final"]["acc/task_v"] = 0.1
    assert str(assess(r, narrowable).verdict) == "no control (ref)"


def test_a_claim_is_not_narrowed_where_the_choice_would_read_its_own_rows_or_leave_a_control_empty(tmp_path):
    r = two_task_results(tmp_path)
    # the control fails u, which this claim (on v only) does not average: nothing to leave out, no verdict
    on_v = Claim("a above b", "T1", "-", "a", "b", mean_over(("v",)), control=REF_UV, tasks=("v",), over=OVER)
    assert str(assess(r, on_v).verdict) == "no control (ref)"
    # a second control with no records: "not run" stands, whatever the first one learns
    none = Control("none", ("nothing",), ("u", "v"), REF_UV.score, REF_UV.bar, "0.5")
    both = Claim("a above b", "T1", "-", "a", "b", mean_over(("u", "v")), control=(REF_UV, none), tasks=("u", "v"),
                 over=OVER)
    assert str(assess(r, both).verdict) == "no control (ref, none not run)"
    # the reference is itself a compared row: choosing its tasks would read one side's scores
    own = Claim("ref above b", "T1", "-", "ref", "b", mean_over(("u", "v")), control=REF_UV, tasks=("u", "v"),
                over=OVER)
    assert str(assess(r, own).verdict) == "no control (ref)" and not assess(r, own).narrowed
    # a second control that learns u only would be left with no task once u is dropped
    u_only = Control("u only", ("ref",), ("u",), REF_UV.score, REF_UV.bar, "0.5")
    empty = Claim("a above b", "T1", "-", "a", "b", mean_over(("u", "v")), control=(REF_UV.on(["v"]), u_only),
                  tasks=("u", "v"), over=OVER)
    assert str(assess(r, empty).verdict) == "no control (u only)" and not assess(r, empty).narrowed


def test_a_compared_reference_is_narrowed_by_its_copy_made_at_seeds_no_claim_compares(tmp_path):
    """The reference made again at seeds of its own (`Planned.seeds`): the tasks that copy fails leave the claim,
    chosen without reading a compared run, and the commit check reads the copy at every seed it holds."""
    r = two_task_results(tmp_path)
    for seed, u in ((5, 0.9), (6, 0.1), (7, 0.9)):     # the twin fails u in seed 6
        r.records[f"ref/twin@seed{seed}"] = {"key": "ref/twin", "seed": seed, "git": "c1",
                                             "final": {"acc/task_u": u, "acc/task_v": 0.9}}
    twin = Control("ref twin", ("ref/twin",), ("u", "v"), REF_UV.score, REF_UV.bar, "0.5")
    own = Claim("ref above b", "T1", "-", "ref", "b", mean_over(("u", "v")), control=twin, tasks=("u", "v"),
                over=OVER)
    got = assess(r, own)
    # on v alone ref − b = +30, +29, +28 points
    assert got.narrowed and got.judged_on == ("v",) and got.left_out == {"ref twin": {"u": "in seed 6"}}
    assert got.ours == "+29.0 ± 2.5 pts (3 seeds)" and got.commits == ""
    r.records["ref/twin@seed7"]["git"] = "c2"
    assert assess(r, own).commits == "seeds made at several commits: `ref/twin` (2 commits)"
    # the copy made at a compared seed by the compared row's config reads a compared run: not narrowed
    r.records["ref@seed0"]["config_hash"] = "h"
    r.records["ref/twin@seed0"] = {**r.records["ref@seed0"], "key": "ref/twin"}
    assert not assess(r, own).narrowed and str(assess(r, own).verdict) == "no control (ref twin)"
    r.records["ref/twin@seed0"]["config_hash"] = "another"
    assert assess(r, own).narrowed


def test_the_page_counts_the_rows_whose_seeds_were_made_at_different_commits(tmp_path):
    from fedlab.evidence.page import commits_line

    r = results(tmp_path, {"a": [0.6, 0.6], "b": [0.5, 0.5]})
    for rec in r.records.values():
        rec["git"] = "c1"
    assert commits_line(r) == "**Commits**: every row (2) was made at one commit."
    r.records["b@seed1"]["git"] = "c2"
    assert commits_line(r) == ("**Commits**: 1 of 2 rows were made at one commit; 1 hold seeds made at different "
                               "commits.")
    # a row the table no longer plans is not counted
    assert commits_line(r, {"a"}) == "**Commits**: every row (1) was made at one commit."


def test_a_verdict_names_the_rows_whose_seeds_mix_commits_or_come_from_a_dirty_tree(tmp_path):
    r = results(tmp_path, {"a": [0.6, 0.61, 0.62, 0.63, 0.64], "b": [0.5] * 5, "ref": [0.9] * 5})
    for rec in r.records.values():
        rec["git"] = "c1"
    c = claim("a above b", "a", "b")
    assert assess(r, c).commits == "" and "commit" not in assess(r, c).verdict_cell()
    r.records["b@seed3"]["git"] = "c2"
    r.records["ref@seed1"]["git"] = "c1+dirty"            # a control's row counts too
    assert assess(r, c).commits == ("seeds made at several commits: `b` (2 commits), `ref` (2 commits); "
                                    "seeds from uncommitted changes: `ref`")
    assert assess(r, c).verdict_cell().endswith("; " + assess(r, c).commits)
    r.records["a@seed0"]["git"] = None                   # made outside a git checkout
    assert assess(r, c).commits.endswith("; seeds made outside git: `a`")
    r.records["a@seed0"]["git"] = "c1"
    # only the seeds the claim compares: a sixth seed of b made elsewhere, with no partner in a, is not read
    r.records["b@seed3"]["git"], r.records["ref@seed1"]["git"] = "c1", "c1"
    r.records["b@seed5"] = {**r.records["b@seed4"], "seed": 5, "git": "c3"}
    assert assess(r, c).commits == ""
