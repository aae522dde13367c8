"""experiments/fedproxy/server_step.py: η_g is chosen on validation runs only, then reported on the test sets."""
from __future__ import annotations

import json
from pathlib import Path

from fedlab.config import load_config
from fedlab.evidence.runner import Results
from fedlab.evidence.summary import load_table

ROOT = Path(__file__).resolve().parents[2]


def _module(tmp_path, monkeypatch):
    mod = load_table("fedproxy", script="server_step")
    monkeypatch.setattr(mod, "OUT", tmp_path)
    return mod


def _record(key, seed, acc):
    return {"key": key, "seed": seed, "label": key, "final": {"llm/acc/mean": acc}}


def test_validation_rows_never_read_the_test_sets_and_the_choice_is_made_on_them(tmp_path, monkeypatch):
    mod = _module(tmp_path, monkeypatch)
    rows = mod.plan()
    assert [p.key for p in rows if p.key.startswith("test/")] == [
        "test/htiess/eta1", "test/fedavg/eta1", f"test/fedavg/eta{mod.SQRT_K}", "test/htiess_all/eta1"]
    for p in rows:
        cfg = load_config(p.config, list(p.overrides))
        assert cfg.data.evaluate_on == ("validation" if p.key.startswith("val/") else "test"), p.key
        assert f"eta{cfg.method.eta_g:g}" in p.key or p.key.endswith(mod.SQRT_K)
        assert cfg.method.aggregator == ("fedavg" if "/fedavg/" in p.key else "h_ties")
        assert cfg.method.denominator == ("all" if "htiess_all" in p.key else "agreeing")
    # validation accuracies that favour η_g = 0.5; the test rows are ignored by the choice
    recs = {}
    for eta, acc in (("0.25", 0.50), ("0.5", 0.60), ("1", 0.55), ("2", 0.40)):
        for s in range(3):
            recs[f"val/htiess/eta{eta}@seed{s}"] = _record(f"val/htiess/eta{eta}", s, acc + 0.01 * s)
    for s in range(3):
        recs[f"test/htiess/eta2@seed{s}"] = _record("test/htiess/eta2", s, 0.99)
    (tmp_path / "results.json").write_text(json.dumps({"_meta": {}, **recs}))
    assert mod.chosen_eta() == "0.5"
    assert "test/htiess/eta0.5" in [p.key for p in mod.plan()]
    text = mod.render(Results(tmp_path / "results.json"))
    assert "Chosen on validation: H-TIES η_g = 0.5." in text and "| H-TIES | 0.5 | 0.610 ± " in text
