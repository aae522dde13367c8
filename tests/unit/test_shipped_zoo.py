"""The shipped zoo: every tiny and pico model's weights are in the repository with a manifest, a fresh
clone pretrains nothing, a damaged file is one line, and a recipe change without new shipped weights fails here."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fedlab.models import shipped, zoo

ROOT = Path(__file__).resolve().parents[2]


def test_every_zoo_model_is_shipped_for_its_current_recipe():
    """Fails when a recipe (architecture, steps, corpus, tokenizer, library versions, ZOO_VERSION) changed without
    new shipped weights: `fedlab zoo build NAME --rebuild && fedlab zoo ship NAME` on the reference machine."""
    m = shipped.manifest()
    assert sorted(m) == sorted(zoo.ZOO)
    stale = {n: (e["fingerprint"], zoo.fingerprint(n)) for n, e in m.items() if e["fingerprint"] != zoo.fingerprint(n)}
    assert not stale, f"recipes changed without new shipped weights (shipped, now): {stale}"


def test_the_shipped_files_match_the_manifest_and_load_as_the_recorded_weights():
    for name in zoo.ZOO:
        assert shipped.problems(name) == [], name
        meta = json.loads((shipped.SHIPPED / name / "meta.json").read_text())
        assert meta["weights_sha256"] == shipped.entry(name)["weights_sha256"] == zoo.read_meta(name)["weights_sha256"]
    from fedlab.models.digest import weights_sha256

    model, _ = zoo.load_model("pico-llama")
    assert weights_sha256(model.state_dict()) == shipped.entry("pico-llama")["weights_sha256"]


def test_a_fresh_home_pretrains_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    monkeypatch.setattr(zoo, "_pretrain", lambda *a: pytest.fail("pretrained although the weights are shipped"))
    assert zoo.resolve("tiny-llama") == str(shipped.SHIPPED / "tiny-llama")
    assert zoo.is_built("tiny-gpt2") and not zoo.is_cached("tiny-gpt2")
    assert [r["built"] for r in zoo.describe_zoo() if r["name"] == "tiny-opt"] == ["shipped"]
    assert not (tmp_path / "zoo").exists()


@pytest.fixture()
def copy_of_the_zoo(tmp_path, monkeypatch):
    root = tmp_path / "shipped"
    root.mkdir()
    shutil.copy(shipped.SHIPPED / shipped.MANIFEST, root)
    shutil.copytree(shipped.SHIPPED / "pico-gpt2", root / "pico-gpt2")
    monkeypatch.setattr(shipped, "SHIPPED", root)
    return root


def test_a_damaged_shipped_file_is_one_line_never_another_model(copy_of_the_zoo, capsys):
    from fedlab.cli import main

    weights = copy_of_the_zoo / "pico-gpt2" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF                                       # one flipped byte, same size
    weights.write_bytes(bytes(data))
    with pytest.raises(shipped.ZooError, match=r"pico-gpt2: .*model.safetensors's sha256 differs from the manifest"):
        zoo.build("pico-gpt2")
    assert main(["run", str(ROOT / "experiments/defaults.yaml"), "model.name=pico-gpt2", "tracking.enabled=false"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "git checkout --" in err and "--rebuild" in err
    assert main(["zoo", "verify", "pico-gpt2"]) == 1
    assert "pico-gpt2: DAMAGED" in capsys.readouterr().out
    (copy_of_the_zoo / "pico-gpt2" / "tokenizer.json").unlink()
    assert "tokenizer.json is missing" in " ".join(shipped.problems("pico-gpt2"))
    (copy_of_the_zoo / shipped.MANIFEST).write_text("{not json")
    with pytest.raises(shipped.ZooError, match="manifest cannot be read"):
        shipped.manifest()


def test_verify_passes_on_the_repository_and_names_a_stale_recipe(capsys, monkeypatch):
    from fedlab.cli import main

    assert main(["zoo", "verify"]) == 0 and f"all {len(zoo.ZOO)} good" in capsys.readouterr().out
    monkeypatch.setattr(zoo, "ZOO_VERSION", zoo.ZOO_VERSION + 1)
    zoo.fingerprint.cache_clear()
    try:
        assert main(["zoo", "verify", "pico-gpt2"]) == 1
        assert "pico-gpt2: STALE" in capsys.readouterr().out
        assert not zoo.shipped_current("pico-gpt2")              # another recipe: built, never the shipped weights
    finally:
        zoo.fingerprint.cache_clear()


def test_rebuild_says_whether_the_weights_equal_the_shipped_ones(tmp_path, monkeypatch, capsys):
    from fedlab import numerics
    from fedlab.cli import main

    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    assert main(["zoo", "build", "pico-gpt2", "--rebuild"]) == 0
    out = capsys.readouterr().out
    assert zoo.is_cached("pico-gpt2")
    if numerics.reference() and all(numerics.digest(t) == numerics.reference()[t] for t in (1, 2)):
        assert "EQUAL to the shipped ones" in out            # the reference numerics rebuild the shipped bits
    else:
        assert "EQUAL to the shipped ones" in out or "DIFFER from the shipped" in out
    assert zoo.resolve("pico-gpt2") == str(shipped.SHIPPED / "pico-gpt2")   # runs keep the shipped weights


def test_a_rebuild_whose_tokenizer_differs_says_so_not_that_the_cpu_computes_otherwise():
    """A WordPiece tokenizer (the BERT encoders') takes part of its vocabulary's ids in a per-process order, so
    its rebuilt weights differ on every machine: the line names the tokenizer, not the CPU."""
    from fedlab.cli import _compare_with_shipped

    e = shipped.entry("pico-bert")
    same_tok = {"fingerprint": e["fingerprint"], "weights_sha256": "0" * 64, "files": e["files"]}
    assert "see `fedlab doctor`" in _compare_with_shipped("pico-bert", same_tok)
    other_tok = {**same_tok, "files": {**e["files"], "tokenizer.json": {"sha256": "1" * 64, "bytes": 1}}}
    line = _compare_with_shipped("pico-bert", other_tok)
    assert "the tokenizer trained here is not the shipped one" in line and "fedlab doctor" not in line
    assert "EQUAL" in _compare_with_shipped("pico-bert", {**other_tok, "weights_sha256": e["weights_sha256"]})
