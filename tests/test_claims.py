"""fedlab.evidence.claims: verdicts of directional claims on hand-built records (paired t-interval over seeds)."""
from fedlab.evidence.claims import BEGIN, END, Claim, check_claim, claims_table, differences_table, write_block
from fedlab.evidence.runner import Results


def results(tmp_path, rows: dict[str, list[float]]) -> Results:
    r = Results(tmp_path / "results.json")
    for key, accs in rows.items():
        for seed, acc in enumerate(accs):
            r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": {"acc": acc}, "zero": {"acc": 0.1}}
    return r


acc = lambda rec: rec["final"]["acc"]


def test_verdicts_follow_the_paired_interval(tmp_path):
    r = results(tmp_path, {"a": [0.60, 0.62, 0.61], "b": [0.50, 0.53, 0.51], "c": [0.60, 0.50, 0.70],
                           "d": [0.61, 0.63, 0.62]})
    # a − b = +10, +9, +10 points: mean 9.67, half-width t(0.975, 2)·s/√3 = 4.303·0.577/1.732 = 1.43
    ours, verdict = check_claim(r, Claim("a above b", "T1", "-", "a", "b", acc))
    assert verdict == "reproduced" and ours == "+9.7 ± 1.4 pts (3 seeds)"
    assert check_claim(r, Claim("b above a", "T1", "-", "b", "a", acc))[1] == "contradicted"
    assert check_claim(r, Claim("c above a", "T1", "-", "c", "a", acc))[1].startswith("inconclusive (excludes < ")
    # comparable (tolerance 2 points): a is 1 point below d, 9.7 ± 1.4 above b, c's interval is wide
    assert check_claim(r, Claim("a ≈ d", "T1", "-", "a", "d", acc, at_least=True))[1] == "reproduced"
    assert check_claim(r, Claim("b ≈ a", "T1", "-", "b", "a", acc, at_least=True))[1] == "contradicted"
    assert check_claim(r, Claim("a ≈ c", "T1", "-", "a", "c", acc, at_least=True))[1].startswith("underpowered")
    # the same run's round 0 as b; a missing row; one seed
    assert check_claim(r, Claim("a over its zero-shot", "T1", "-", "a", "a", acc,
                               fn_b=lambda rec: rec["zero"]["acc"]))[1] == "reproduced"
    assert check_claim(r, Claim("x", "T1", "-", "a", "missing", acc)) == ("-", "not run yet")
    one = results(tmp_path, {"a": [0.6], "b": [0.5]})
    assert check_claim(one, Claim("x", "T1", "-", "a", "b", acc)) == ("-", "too few seeds (1; a verdict needs 3)")


def test_several_rows_average_per_seed(tmp_path):
    r = results(tmp_path, {"t1/a": [0.6, 0.7, 0.5], "t2/a": [0.8, 0.9, 0.7], "t1/b": [0.5, 0.6, 0.4],
                           "t2/b": [0.5, 0.6, 0.4]})
    # per seed: a = 0.7, 0.8, 0.6; b = 0.5, 0.6, 0.4 → +20 every seed (no spread): reproduced
    ours, verdict = check_claim(r, Claim("a", "T", "-", ("t1/a", "t2/a"), ("t1/b", "t2/b"), acc))
    assert verdict == "reproduced" and ours.startswith("+20.0 ± 0.0")


def test_block_is_replaced_in_place(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\ntext\n")
    r = results(tmp_path, {"a": [0.6, 0.62], "b": [0.5, 0.5]})
    write_block(readme, claims_table(r, [Claim("a above b", "T1", "61 vs 50", "a", "b", acc)]))
    write_block(readme, claims_table(r, [Claim("a above b", "T1", "61 vs 50", "a", "b", acc)]))
    text = readme.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1 and text.startswith("# Title\n\ntext\n")
    # differences +10, +12: sd 1.414, MDE at n = 2 is 11.55 sd = 16.3 points; 2 seeds give no verdict
    assert "| a above b | T1 | 61 vs 50 | +11.0 ± 12.7 pts (2 seeds) | 16.3 pts | too few seeds (2; " in text


def test_two_seeds_show_the_difference_but_give_no_verdict(tmp_path):
    # a − b = +40, +41: the 2-seed interval 40.5 ± 6.4 lies far above 0, yet one seed could carry it
    r = results(tmp_path, {"a": [0.90, 0.91], "b": [0.50, 0.50]})
    ours, verdict = check_claim(r, Claim("a above b", "T1", "-", "a", "b", acc))
    assert ours == "+40.5 ± 6.4 pts (2 seeds)" and verdict == "too few seeds (2; a verdict needs 3)"
    assert check_claim(r, Claim("a ≈ b", "T1", "-", "a", "b", acc, at_least=True))[1].startswith("too few seeds")
    # one common seed: no difference to show, the same words (not a verdict such as "inconclusive")
    r1 = results(tmp_path, {"a": [0.90], "b": [0.50]})
    assert check_claim(r1, Claim("a above b", "T1", "-", "a", "b", acc)) == ("-", "too few seeds (1; a verdict needs 3)")
    # the third seed gives the verdict
    r3 = results(tmp_path, {"a": [0.90, 0.91, 0.92], "b": [0.50, 0.50, 0.50]})
    assert check_claim(r3, Claim("a above b", "T1", "-", "a", "b", acc))[1] == "reproduced"
    # a paired-difference table holds the same rule in its 'significant' column
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
    r = results(tmp_path, {"a": [0.60, 0.50, 0.70], "b": [0.58, 0.56, 0.60]})
    # a − b = +2, −6, +10 points: mean 2, sd 8, MDE 3.264·8 = 26.1; interval 2 ± 19.9
    ours, verdict = check_claim(r, Claim("a above b", "T", "60 vs 58 (+1.9)", "a", "b", acc))
    assert ours == "+2.0 ± 19.9 pts (3 seeds)" and verdict == "underpowered (paper +1.9 < MDE 26.1)"
    verdict = check_claim(r, Claim("a above b", "T", "90 vs 60 (+30.0)", "a", "b", acc))[1]
    assert verdict == "inconclusive (excludes < -17.9 and > +21.9: the paper's +30.0 is ruled out)"
    assert check_claim(r, Claim("a above b", "T", "x", "a", "b", acc, effect=-27.0))[1] == (
        "inconclusive (excludes < -17.9 and > +21.9: the paper's -27.0 is ruled out)")
    assert Claim("x", "T", "60.9 vs 64.5 (−3.7)", "a", "b", acc).paper_effect() == -3.7
    # comparable-within-tolerance claims: an interval wider than the tolerance cannot decide
    assert check_claim(r, Claim("a ≈ b", "T", "-", "a", "b", acc, at_least=True))[1].startswith("underpowered")


def test_a_claim_on_rows_another_config_made_shows_its_difference_without_a_verdict(tmp_path):
    """Records made by another config than the script runs now (`Results.outdated`) give no verdict, on either
    side of a claim and in the differences table; the same records unmarked give one."""
    r = results(tmp_path, {"a": [0.60, 0.62, 0.61], "b": [0.50, 0.53, 0.51], "c": [0.40, 0.42, 0.41]})
    c = Claim("a above b", "T1", "-", "a", "b", acc)
    assert check_claim(r, c)[1] == "reproduced"
    assert "| reproduced |" in claims_table(r, [c])[2]
    for side in ("a", "b"):
        row = claims_table(r, [c], outdated={side})[2]
        assert "+9.7 ± 1.4 pts (3 seeds)" in row and "| no verdict: records made by another config" in row
    both = Claim("a and c above b", "T1", "-", ("a", "c"), "b", acc)      # a tuple side: any of its rows counts
    assert "no verdict" in claims_table(r, [both], outdated={"c"})[2]
    r.records = {k: {**v, "final": {"acc/mean": v["final"]["acc"]}} for k, v in r.records.items()}
    pair = [("a − b", "a", "acc/mean", "b", "acc/mean")]
    assert differences_table(r, pair)[2].endswith("| yes |")
    assert differences_table(r, pair, outdated={"b"})[2].endswith("| no verdict (another config) |")


def test_the_baselines_table_gives_no_verdict_on_records_another_config_made(tmp_path):
    """experiments/baselines/make_table.py's paired differences take the outdated set from the render's one pass
    over the records: hand-made records name no config, so another config made them and no pair has a verdict."""
    import importlib.util
    from pathlib import Path

    from fedlab.evidence.runner import Results

    path = Path(__file__).resolve().parents[1] / "experiments/baselines/make_table.py"
    spec = importlib.util.spec_from_file_location("baselines_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = Results(tmp_path / "results.json")
    for s in range(3):
        for m, acc in (("centralized", 0.8 + 0.01 * s), ("zeroshot", 0.5)):
            r.records[f"tiny/hetero/{m}@seed{s}"] = {"key": f"tiny/hetero/{m}", "seed": s, "seconds": 1,
                                                    "final": {"acc/mean": acc}}
    row = next(line for line in mod.render(r).splitlines() if line.startswith("| centralized − zeroshot |"))
    assert row == "| centralized − zeroshot | +0.310 ± 0.025 | 3 | 0.033 | 0.000347 | no verdict (another config) |"
