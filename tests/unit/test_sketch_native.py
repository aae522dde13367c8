"""The count sketch's native passes (fedlab/comm/count_sketch.c through fedlab.comm.native): compress is each
bucket's sum in index order, bit for bit; decompress is the products' bit for bit; partial tiles and column
blocks, Y = 1 and 3, NaN where a NaN bucket is read, the products where autograd needs them or the library
cannot be built, and one build per source."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from fedlab import compiled
from fedlab.comm import native
from fedlab.comm.sketch import NATIVE_MIN_DIM, CountSketch, native_agrees


@pytest.fixture
def on():
    """Native passes at every size for one test; the library is skipped where this machine cannot build it."""
    compiled.set_mode("on")
    if native.library(native_agrees) is None:
        compiled.set_mode(None)
        pytest.skip("the native count sketch cannot be built on this machine (the products run instead)")
    yield
    compiled.set_mode(None)


def _index_order(sk: CountSketch, x: torch.Tensor) -> torch.Tensor:
    """Eq. 12 by hand in float32: each bucket's signed entries added from zero in index order."""
    flat = x.reshape(-1, sk.dim)
    want = torch.zeros(flat.shape[0], sk.rows, sk.cols)
    for i in range(sk.dim):
        for y in range(sk.rows):
            want[:, y, int(sk.buckets[y, i])] += float(sk.signs[y, i]) * flat[:, i]
    return want.reshape(*x.shape[:-1], sk.rows, sk.cols)


# 2 × 13 rows: a partial tile of 8; D = 603: a partial block of 8 columns; Z = 1: every entry in one bucket
@pytest.mark.parametrize("dim,rows,cols", [(603, 3, 47), (600, 1, 48), (16, 3, 1)])
def test_native_compress_is_each_buckets_sum_in_index_order_and_decompress_the_products(on, dim, rows, cols):
    sk = CountSketch(dim, rows, cols, seed=3)
    x = torch.randn(2, 13, dim, generator=torch.Generator().manual_seed(2))
    s = sk.compress(x)
    assert s.shape == (2, 13, rows, cols) and s.is_contiguous()
    assert torch.equal(s, _index_order(sk, x))
    d = sk.decompress(s)
    assert d.shape == (2, 13, dim) and d.is_contiguous()
    assert torch.equal(d, sk.decompress_products(s))


def test_a_nan_bucket_gives_nan_exactly_where_the_median_reads_it(on):
    sk = CountSketch(40, 3, 6, seed=5)
    s = torch.randn(9, 3, 6, generator=torch.Generator().manual_seed(0))
    s[4, 1, 2] = float("nan")
    d = sk.decompress(s)
    reads = sk.buckets[1] == 2
    assert d[4].isnan().tolist() == reads.tolist()
    assert not d[torch.arange(9) != 4].isnan().any()
    finite = torch.arange(9) != 4
    assert torch.equal(d[finite], sk.decompress_products(s[finite]))


def test_the_native_passes_run_from_their_dimension_on_in_auto_and_never_when_off(monkeypatch):
    ran = []
    monkeypatch.setattr(native, "compress", lambda sk, x, lib: ran.append(sk.dim) or sk.compress_products(x))
    monkeypatch.setattr(native, "library", lambda *a: object())
    try:
        compiled.set_mode("auto")
        CountSketch(NATIVE_MIN_DIM - 1, 3, 8, seed=0).compress(torch.zeros(2, NATIVE_MIN_DIM - 1))
        CountSketch(NATIVE_MIN_DIM, 3, 8, seed=0).compress(torch.zeros(2, NATIVE_MIN_DIM))
        CountSketch(NATIVE_MIN_DIM, 3, 8, seed=0).compress(torch.zeros(2, NATIVE_MIN_DIM, dtype=torch.float64))
        CountSketch(NATIVE_MIN_DIM, 5, 8, seed=0).compress(torch.zeros(2, NATIVE_MIN_DIM))
        compiled.set_mode("off")
        CountSketch(NATIVE_MIN_DIM, 3, 8, seed=0).compress(torch.zeros(2, NATIVE_MIN_DIM))
    finally:
        compiled.set_mode(None)
    assert ran == [NATIVE_MIN_DIM]


def test_inputs_that_need_gradients_take_the_products(on, monkeypatch):
    sk = CountSketch(600, 3, 48, seed=3)
    x = torch.randn(10, 600, requires_grad=True)
    want = torch.autograd.grad(sk.decompress_products(sk.compress_products(x)).sum(), x)[0]
    monkeypatch.setattr(native, "compress", lambda *a: 1 / 0)
    monkeypatch.setattr(native, "decompress", lambda *a: 1 / 0)
    got = torch.autograd.grad(sk.decompress(sk.compress(x)).sum(), x)[0]
    assert torch.equal(got, want)


def test_a_library_that_cannot_be_built_leaves_the_products_and_says_why(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    native.forget()
    try:
        assert native.library() is None
        assert "count sketch native passes: off, the products run: RuntimeError: false failed" in capsys.readouterr().err
        assert native.status().startswith("off, the products run: RuntimeError: false failed")    # fedlab doctor
        compiled.set_mode("on")
        sk = CountSketch(600, 3, 48, seed=3)
        x = torch.randn(5, 600)
        assert torch.equal(sk.compress(x), sk.compress_products(x))
        assert list((tmp_path / "native").iterdir()) == []       # no half-written library left behind
        monkeypatch.delenv("CC")
        native.forget()
        if shutil.which("cc") is not None:       # built, but a check that fails keeps the products
            assert native.library(lambda lib: False) is None
            assert "a check on a small sketch gave other numbers" in native.status()
    finally:
        compiled.set_mode(None)
        native.forget()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler here")
def test_the_library_is_built_once_per_source_and_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    first = native._built("cc")
    assert first.parent == tmp_path / "native" and first.exists()
    assert native.target("gcc") != first       # another compiler, another build
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("built again"))
    assert native._built("cc") == first
