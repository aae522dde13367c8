"""Configs: every YAML under experiments/ validates; bad values fail fast with one clear line."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedlab.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
YAMLS = sorted(p for p in (ROOT / "experiments").rglob("*.yaml"))


def test_defaults_build():
    cfg = load_config()
    assert cfg.method.name == "fedavg" and cfg.federation.rounds == 5


@pytest.mark.parametrize("path", YAMLS, ids=[str(p.relative_to(ROOT)) for p in YAMLS])
def test_every_experiment_yaml_validates(path):
    from fedlab.config import build_config

    cfg = load_config(path)
    assert cfg.method.name
    assert build_config(cfg.to_dict()) == cfg   # how a Ray worker rebuilds the config it is sent


def test_overrides_and_inheritance():
    cfg = load_config(ROOT / "experiments/baselines/fedprox_homo.yaml",
                      ["federation.rounds=3", "method.mu=0.1", "model.lora.r=4"])
    assert (cfg.federation.rounds, cfg.method.mu, cfg.model.lora.r) == (3, 0.1, 4)
    assert cfg.data.partition == "iid" and cfg.model.name == "tiny-llama"


@pytest.mark.parametrize("override, needle", [
    ("federation.rounds=-1", "federation.rounds: -1 is not allowed; expected an integer >= 0"),
    ("method.name=nope", "method.name: 'nope' is not allowed"),
    ("federaton.rounds=3", "did you mean 'federation'"),
    ("federation.roundz=3", "did you mean 'federation.rounds'"),
    ("data.partition=dirichlet", "data.partition: 'dirichlet' is not allowed (did you mean"),
    ("data.tasks=[recall,nope]", "data.tasks: 'nope' is not allowed"),
    ("model.lora.r=0", "model.lora.r: 0 is not allowed"),
    ("federation.lr=fast", "federation.lr: 'fast' is not allowed; expected a number"),
    ("method.mu=-1", "method.mu: -1.0 is not allowed"),
    ("data.source=hf:arc", "data.source: 'hf:arc' is not allowed (did you mean 'hf:arc_"),
    ("data.num_clients=2000", "data.num_clients: 2000 is not allowed"),
])
def test_bad_values_name_the_key(override, needle):
    with pytest.raises(ConfigError) as e:
        load_config(ROOT / "experiments/baselines/fedprox_hetero.yaml", [override])
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_cli_fails_fast_with_one_line(tmp_path):
    for override in ("federation.rounds=-1", "method.name=nope", "federation.roundz=2", "model.name=./no/such/dir"):
        p = subprocess.run([sys.executable, "-m", "fedlab.cli", "run",
                            str(ROOT / "experiments/baselines/fedavg_hetero.yaml"), override],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert p.returncode == 2, p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("fedlab: error: "), p.stderr
        assert not (tmp_path / "runs").exists() and not (tmp_path / "mlruns").exists()


def _hf_rows(root, n):
    import json

    (root / "sst2").mkdir(parents=True)
    for split in ("train", "test"):
        (root / "sst2" / f"{split}.jsonl").write_text(
            "\n".join(json.dumps({"sentence": "a fine film", "label": 1}) for _ in range(n)) + "\n")
    return root


@pytest.mark.parametrize("overrides, needle", [
    (["data.num_clients=5000", "data.partition=iid"], "data.num_clients"),          # more clients than samples
    (["data.source=hf:sst2", "data.hf_dir=HF", "data.num_clients=5", "data.partition=iid"],
     "data.num_clients: 5 clients but 3 training samples"),                       # only the data can tell
    (["method.name=fedproxy", "method.kappa=0.95"], "method.kappa"),               # κ leaving no block
    (["method.name=fedproxy", "method.rho=0.5"], "method.rho"),
    (["model.lora.r=0"], "model.lora.r"),
    (["model.name=./no/such/model"], "model.name"),
    (["method.name=standalone", "data.num_clients=2", "data.partition=iid", "model.clients=[tiny-gpt2,./nope]"],
     "model.clients[1]"),
    (["data.train_per_task=0"], "data.train_per_task"),
])
def test_bad_input_fails_in_one_line_before_anything_is_written(tmp_path, overrides, needle):
    hf = _hf_rows(tmp_path / "hf", 3)
    work = tmp_path / "work"
    work.mkdir()
    overrides = [o.replace("=HF", f"={hf}") for o in overrides]
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", "run", str(ROOT / "experiments/defaults.yaml"), *overrides],
                       capture_output=True, text=True, cwd=work, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("fedlab: error: ") and needle in lines[0], p.stderr
    assert list(work.iterdir()) == []          # no runs/, no mlruns/: nothing written


def test_an_unreachable_hugging_face_id_fails_in_one_line(tmp_path, monkeypatch):
    """Offline and uncached, a Hub id for a client model stops the run before anything is written."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")        # no waiting for network retries in the test
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", "run", str(ROOT / "experiments/defaults.yaml"),
                        "method.name=standalone", "data.num_clients=2", "data.partition=iid",
                        "model.clients=[tiny-gpt2,nobody/no-such-model]"],
                       capture_output=True, text=True, cwd=work, timeout=120, env={**os.environ})
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("fedlab: error: model.clients[1]: 'nobody/no-such-model'"), p.stderr
    assert list(work.iterdir()) == []


def _accepting(path):
    """(method, config) for every registered method that accepts this YAML with `method.name=<method>`."""
    from fedlab import registry

    out = []
    for name in registry.method_names():
        try:
            out.append((name, load_config(path, [f"method.name={name}"])))
        except ConfigError:   # e.g. client models this method cannot run
            pass
    return out


# what each method runs, whatever YAML it is named on: (aggregator, PCR λ) where it has them
RESOLVED = {"ties": ("ties", 0.0), "fedot": ("fedavg", 0.0), "ot": ("fedavg", 0.0), "fedbiot": ("fedavg", 0.0),
            "fedot_et": ("fedavg", 0.0), "fedproxy": ("h_ties", 1e-5), "fedavg": ("mean", None),
            "fedprox": ("mean", None)}


@pytest.mark.parametrize("path", YAMLS, ids=[str(p.relative_to(ROOT)) for p in YAMLS])
def test_a_method_named_on_any_yaml_runs_with_its_own_fields(path):
    """`method.name=X` on any experiment YAML resolves X's section from X's own defaults: a parent's
    fields (FedProxy's H-TIES and PCR) never reach TIES or the Offsite-Tuning family."""
    from fedlab import registry

    own = load_config(path).method.name
    for name, cfg in _accepting(path):
        if name == own:
            continue
        assert cfg.method == registry.get(name).config_cls(), (name, cfg.method)
        if name in RESOLVED:
            agg, lam = RESOLVED[name]
            assert cfg.method.aggregator == agg and getattr(cfg.method, "pcr_lambda", None) == lam


def test_variants_of_a_yaml_resolve_to_what_their_names_say():
    fp = ROOT / "experiments/fedproxy"
    ties = load_config(fp / "hetero_ties.yaml").method
    assert (ties.name, ties.aggregator, ties.pcr_lambda, ties.density) == ("ties", "ties", 0.0, 0.2)
    wo = load_config(fp / "hetero_wo_htiess.yaml").method       # same method: the parent's fields stay
    assert (wo.name, wo.aggregator, wo.pcr_lambda) == ("fedproxy", "fedavg", 0.001)
    biot = load_config(fp / "hetero.yaml", ["method.kappa=0.3", "method.name=fedbiot"]).method
    assert (biot.aggregator, biot.pcr_lambda, biot.kappa, biot.realign) == ("fedavg", 0.0, 0.3, True)
    llm2slm = load_config(ROOT / "experiments/fedmkt/one_to_one_llm2slm.yaml").method
    assert (llm2slm.name, llm2slm.mutual) == ("llm2slm", False)


@pytest.mark.parametrize("override, needle", [
    ("method.aggregator=h_ties", "method.aggregator: 'h_ties' is not allowed with method 'ties', which fixes it "
                                 "at 'ties'; use method.name=fedproxy to set it"),
    ("method.pcr_lambda=0.001", "method.pcr_lambda: 0.001 is not allowed with method 'ties'"),
])
def test_a_variants_fixed_fields_cannot_be_set(override, needle):
    with pytest.raises(ConfigError) as e:
        load_config(ROOT / "experiments/fedproxy/hetero_ties.yaml", [override])
    assert needle in str(e.value)
    with pytest.raises(ConfigError, match="method.realign: False is not allowed with method 'fedbiot'"):
        load_config(ROOT / "experiments/fedproxy/hetero.yaml", ["method.name=fedbiot", "method.realign=false"])
