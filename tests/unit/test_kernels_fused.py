"""The fused (torch.compile) merge passes of h_ties and ties (fedlab/aggregators/fused.py): the same signs and
values within float32 rounding as the eager block loop, on updates with and without ties at the trimming
threshold; the tie rule by hand; the mode switch."""
from __future__ import annotations

import pytest
import torch

from fedlab import compiled
from fedlab.aggregators import fused, h_ties, ties
from fedlab.aggregators.basic import _keeps


@pytest.fixture
def mode():
    """Set FEDLAB_FUSED_KERNELS for one test, the process's choice forgotten after."""
    yield compiled.set_mode
    compiled.set_mode(None)


def _updates() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "dense": torch.randn(8, 40_003, generator=g),
        # a quarter-step grid: thousands of entries tie at every row's threshold (index order decides), over more
        # columns than one of the block loop's blocks (2^17), so the tie count carries across blocks
        "ties at the threshold": (torch.randn(6, 300_011, generator=g) * 4).round() / 4,
        # mostly zeros: rows whose kept count reaches into the zeros
        "sparse": torch.where(torch.rand(5, 20_000, generator=g) < 0.9, 0.0, torch.randn(5, 20_000, generator=g)),
        "float64": torch.randn(4, 30_001, generator=g, dtype=torch.float64),
        "one client": torch.randn(1, 10_007, generator=g),
    }


def _both(fn, tau, mode):
    mode("off")
    eager = fn(tau)
    mode("on")
    if not fused.wanted(tau):
        pytest.skip("torch.compile cannot build kernels on this machine (the eager kernels run instead)")
    return eager, fn(tau)


@pytest.mark.parametrize("name", list(_updates()))
@pytest.mark.parametrize("kernel", ["h_ties", "h_ties all", "ties", "ties weighted", "ties keep all"])
def test_the_fused_kernels_equal_the_eager_ones(name, kernel, mode):
    """The same sign (or zero) at every coordinate and values within a relative 1e-6 (measured: at most 2.4e-7,
    two float32 steps — the eager kernel's Σ_k w_k·x_k is a BLAS product with its own summation order), except,
    for weighted TIES, at coordinates whose elected sum Σ_k w_k τ̃_k cancels to within float32 rounding of 0: there
    the summation order (the BLAS's, which differs between machine kinds) elects the sign, and either is right.
    Such coordinates are counted and must stay few. Unweighted sums of these data are exact in any order, so
    there every coordinate is compared (a sum of 0 elects +, in both kernels)."""
    tau = _updates()[name]
    w = torch.linspace(0.5, 2.0, tau.shape[0])
    density = 0.35
    fn = {"h_ties": lambda t: h_ties(t),
          "h_ties all": lambda t: h_ties(t, denominator="all", r0=0.6, delta=0.3),
          "ties": lambda t: ties(t, density=0.2),
          "ties weighted": lambda t: ties(t, density=density, weights=w),
          "ties keep all": lambda t: ties(t, density=1.0)}[kernel]
    eager, got = _both(fn, tau, mode)
    sure = torch.ones_like(eager, dtype=torch.bool)
    if kernel == "ties weighted":   # unweighted sums of these data are exact in any order: every coordinate counts
        thr, cutoff = fused.keep_rule(tau, _keeps(tau, density))
        kept = fused._kept(tau, thr, cutoff).double()
        total, scale = w.double() @ kept, w.double() @ kept.abs()
        # the sum's sign survives any summation order (or nothing is kept there: 0 whatever the order)
        sure = (total.abs() > 1e-5 * scale) | (scale == 0)
        assert sure.double().mean() >= 0.99     # the quarter-step grid cancels at about 0.2 % of coordinates
    assert torch.equal(torch.sign(got[sure]), torch.sign(eager[sure]))
    assert torch.allclose(got[sure], eager[sure], rtol=1e-6, atol=0.0), float(
        ((got - eager)[sure].abs() / eager[sure].abs()).nan_to_num().max())


def test_a_row_that_keeps_nothing_contributes_nothing(mode):
    tau = torch.randn(3, 5_000, generator=torch.Generator().manual_seed(1))
    # H-TIES retention r_k = clip(r0 − δ·h_norm_k, 0, 1): r0 = 0.2, δ = 1 sends the most heterogeneous row to 0
    eager, got = _both(lambda t: h_ties(t, r0=0.2, delta=1.0), tau, mode)
    assert torch.equal(got, eager)


def test_the_tie_rule_by_hand():
    # row 0: |τ| = 3, 1, 1, 1, 0 — keep 2: the 3 and the first 1 (column 1), so cutoff = 2
    # row 1: |τ| = 2, 5, 2, 0, 2 — keep 3: everything ≥ 2 is 4 entries, the three largest are 5 and the 2s at
    #        columns 0 and 2; cutoff = 3
    # row 2: keep 0: nothing, cutoff 0
    tau = torch.tensor([[3.0, -1.0, 1.0, 1.0, 0.0], [2.0, -5.0, -2.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    thr, cutoff = fused.keep_rule(tau, [2, 3, 0])
    assert thr[:2, 0].tolist() == [1.0, 2.0]
    assert cutoff[:, 0].tolist() == [2, 3, 0]
    kept = fused._kept(tau, thr, cutoff)
    assert kept.tolist() == [[3.0, -1.0, 0.0, 0.0, 0.0], [2.0, -5.0, -2.0, 0.0, 0.0], [0.0] * 5]


def test_the_mode_is_one_clear_error_for_a_bad_value(monkeypatch):
    compiled.set_mode(None)
    monkeypatch.setenv("FEDLAB_FUSED_KERNELS", "fast")
    with pytest.raises(ValueError, match=r"FEDLAB_FUSED_KERNELS: 'fast' is not allowed; allowed: auto, on, off"):
        compiled.mode()
    compiled.set_mode(None)


def test_a_bad_value_stops_a_run_in_its_preflight(monkeypatch):
    """Not a traceback at the first aggregation: the run's preflight reads the mode and refuses in one line."""
    from fedlab.config import ConfigError, load_config
    from fedlab.experiment import preflight

    compiled.set_mode(None)
    monkeypatch.setenv("FEDLAB_FUSED_KERNELS", "fast")
    try:
        with pytest.raises(ConfigError, match=r"^FEDLAB_FUSED_KERNELS: 'fast' is not allowed; allowed: auto, on, off$"):
            preflight(load_config("experiments/coplms/hetero.yaml", []))
    finally:
        compiled.set_mode(None)


def test_auto_fuses_only_large_floating_updates(monkeypatch, mode):
    mode("auto")
    monkeypatch.setattr(compiled, "compiles", lambda: True)
    assert not fused.wanted(torch.zeros(2, fused.MIN_P - 1))
    assert fused.wanted(torch.zeros(2, fused.MIN_P))
    assert not fused.wanted(torch.zeros(2, fused.MIN_P, dtype=torch.int32))
    mode("off")
    assert not fused.wanted(torch.zeros(2, fused.MIN_P))


def test_a_fused_kernel_that_fails_falls_back_to_the_eager_one(mode, monkeypatch, capsys):
    tau = _updates()["dense"]
    mode("off")
    want = h_ties(tau)
    mode("on")
    if not fused.wanted(tau):
        pytest.skip("torch.compile cannot build kernels on this machine")

    def broken(*a, **k):
        raise RuntimeError("no kernel for this shape")
    monkeypatch.setattr(fused, "h_ties_merge", broken)
    assert torch.equal(h_ties(tau), want)
    assert torch.equal(h_ties(tau), want)
    err = capsys.readouterr().err
    assert err.count("fused h_ties failed (RuntimeError: no kernel for this shape)") == 1


def test_fused_kernels_run_only_on_float32_and_float64_cpu_tensors(mode, monkeypatch):
    mode("on")
    monkeypatch.setattr(compiled, "compiles", lambda: True)
    assert fused.wanted(torch.zeros(2, 8))
    assert fused.wanted(torch.zeros(2, 8, dtype=torch.float64))
    assert not fused.wanted(torch.zeros(2, 8, dtype=torch.bfloat16))
    assert not fused.wanted(torch.zeros(2, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="allowed: auto, on, off"):
        compiled.set_mode("fast")
