"""Co-PLMs' table rows: the heterogeneous and homogeneous settings, the ablations, the sweeps, the learning curves, the controls and the real LLM."""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from fedlab.evidence import (
    Planned,
)

HERE = Path(__file__).resolve().parent
LAMBDAS = (("1", "1.0"), ("0.1", "0.1"))
HETERO = [("standalone", "Standalone"), ("fedcollm", "FedCoLLM"), ("fedmkt", "FedMKT"), ("coplms", "Co-PLMs")]
HOMO = [("standalone", "Standalone"), ("fedlora", "FedLoRA"), ("fedap", "FedAP"), ("coplms", "Co-PLMs")]
ABLATION = [("coplms", "Co-PLMs"), ("coplms_no_dst", "w/o DST"), ("coplms_no_saml", "w/o SAML"),
            ("coplms_kt_sum", "L_kt summed per answer (kt_reduction: sum)")]
# one axis at a time around the table's Co-PLMs row (K = 16, κ = 0.5; α, β as tune.py chose), λ = 1 (the
# README's sweep backed by committed records); α and β themselves are tune.py's grid
SWEEP = [("topk", "4", "K (top-K pooling)"), ("topk", "64", "K (top-K pooling)"),
         ("kappa", "0.67", "κ (fraction of the LLM's blocks the DPM drops)"),
         ("kappa", "0.84", "κ (fraction of the LLM's blocks the DPM drops)")]
SWEEP_DEFAULT = {"topk": "16", "kappa": "0.5"}
# per-round curves: the server DPM's and LLM's scores after every round, with server SAML and without
CURVES = [("coplms", "Co-PLMs"), ("coplms_no_saml", "w/o SAML")]
FAMILIES = ["tiny-gpt2", "tiny-opt", "tiny-bloom"]


@functools.cache
def hetero_config():
    """hetero.yaml resolved: its devices' SLM families (`model.clients`, client i's at i) and the test items a
    device is scored on."""
    from fedlab.config import load_config

    return load_config(str(HERE / "hetero.yaml"))


def tuned_alpha_beta() -> tuple[str, str] | None:
    """(α, β) chosen on validation by `tune.py` (None until its grid is complete)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("coplms_tune", HERE / "tune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.chosen()


def _method(name: str, slm: str | None = None) -> tuple[str, ...]:
    """Overrides that make `name` run in this setting: FedLoRA and FedAP train the devices' SLM itself
    (model.name is the SLM, no LLM); FedMKT distils on the server's share as its public set; Co-PLMs and its
    ablations at the α, β `tune.py` chose on validation, once it has."""
    if name == "fedlora":
        return ("method.name=fedavg", f"model.name={slm}", "model.clients=null")
    if name == "fedap":
        return ("method.name=fedap", f"model.name={slm}", "model.clients=null")
    if name == "coplms_kt_sum":      # the ablation: L_kt summed over an answer's paired positions
        return (*_method("coplms"), "method.kt_reduction=sum")
    tuned = tuned_alpha_beta() if name.startswith("coplms") else None
    return (f"method.name={name}",) + ((f"method.alpha={tuned[0]}", f"method.beta={tuned[1]}") if tuned else ())


def plan() -> list[Planned]:
    rows = []
    for lam, alpha in LAMBDAS:
        for m, label in HETERO:
            rows.append(Planned(f"hetero/lambda{lam}/{m}", HERE / "hetero.yaml", (*_method(m), f"data.alpha={alpha}"),
                                label=label, setting=f"hetero λ={lam}"))
    for lam, alpha in LAMBDAS:
        for m, label in ABLATION[1:]:
            rows.append(Planned(f"ablation/lambda{lam}/{m}", HERE / "hetero.yaml", (*_method(m), f"data.alpha={alpha}"),
                                label=label, setting=f"hetero λ={lam}"))
    for slm in FAMILIES:
        for lam, alpha in LAMBDAS:
            for m, label in HOMO:
                rows.append(Planned(f"homo/{slm}/lambda{lam}/{m}", HERE / "homo.yaml",
                                    (f"model.clients=[{slm},{slm},{slm}]", *_method(m, slm), f"data.alpha={alpha}"),
                                    label=label, setting=f"homo {slm} λ={lam}"))
    for model in CONTROL_MODELS:
        rows += [control_row(model, "zeroshot"), control_row(model, "centralized")]
    for axis, value, _label in SWEEP:
        rows.append(Planned(f"sweep/{axis}{value}", HERE / "hetero.yaml", (*_method("coplms"), f"method.{axis}={value}"),
                            label=f"Co-PLMs, {axis} = {value}", setting="hetero λ=1 sweep"))
    for m, label in CURVES:
        rows.append(Planned(f"curves/lambda1/{m}", HERE / "hetero.yaml", (*_method(m), "eval.every=1"),
                            label=f"{label}, scored every round", setting="hetero λ=1 curves"))
    for m, label in REAL:
        key = f"real/hetero/{m}"
        rows.append(Planned(key, HERE / "hetero_smollm2.yaml", (*_method(m), *real_rate(key)), label=label,
                            setting="real hetero λ=1"))
    # the real table's own controls, at its budget: SmolLM2 and each device family of hetero.yaml on the pooled data
    for model in (REAL_LLM, *hetero_config().model.clients):
        p = real_control_row(model)
        rows.append(dataclasses.replace(p, overrides=(*p.overrides, *real_rate(p.key))))
    return rows


def control_row(model: str, kind: str) -> Planned:
    """Table 1's reference row `control/<model>/<kind>`: the model alone on hetero.yaml's pooled data, zero-shot
    (`kind` zeroshot) or LoRA-tuned on it at the tables' budget (centralized)."""
    extra = ("method.include_public=true",) if kind == "centralized" else ()
    return Planned(f"control/{model}/{kind}", HERE / "hetero.yaml",
                   (f"method.name={kind}", f"model.name={model}", "model.clients=null", *extra),
                   label=f"{model} {'zero-shot' if kind == 'zeroshot' else kind}", setting="positive control")


def real_control_row(model: str) -> Planned:
    """The real table's reference row `real/control/<model>/centralized`: the model LoRA-tuned on the pooled data
    at that table's budget (hetero_smollm2.yaml), at the YAML's rate (`plan` adds the rate chosen for it)."""
    named = () if model == REAL_LLM else (f"model.name={model}",)
    return Planned(f"real/control/{model}/centralized", HERE / "hetero_smollm2.yaml",
                   ("method.name=centralized", *named, "model.clients=null", "method.include_public=true"),
                   label=f"{model} centralized", setting="real positive control")


@functools.cache
def real_rates() -> dict[str, str]:
    """{"devices": the device SLMs' rate, "server": SmolLM2's}, each as `budget.py`'s grid of that name chose it
    on validation data (`real_devices`, `real_server`); a key is absent before its grid has chosen."""
    from fedlab.evidence.budget import choices_in

    chosen = {who: choices_in(HERE, chain=f"real_{who}").get("federation.lr") for who in ("devices", "server")}
    return {who: lr for who, lr in chosen.items() if lr is not None}


def real_rate(key: str) -> tuple[str, ...]:
    """The overrides that run the real table's row `key` at the rates chosen for it (`real_rates`): SmolLM2's
    control at the server's (`federation.lr`); every other row's devices at the devices' (`federation.lr`), and
    the server step of FedCoLLM and Co-PLMs at the server's (`method.server_lr`). () before either grid has
    chosen (hetero_smollm2.yaml's rate for both); a rate not chosen yet stays the YAML's, so a server step never
    takes the devices' rate (`method.server_lr` null falls back to `federation.lr`)."""
    from fedlab.config import load_config

    rates = real_rates()
    if not rates:
        return ()
    yaml_rate = str(load_config(str(HERE / "hetero_smollm2.yaml")).federation.lr)
    devices, server = rates.get("devices", yaml_rate), rates.get("server", yaml_rate)
    if key == f"real/control/{REAL_LLM}/centralized":
        return (f"federation.lr={server}",)
    return (f"federation.lr={devices}",) + ((f"method.server_lr={server}",)
                                             if key.endswith(("/fedcollm", "/coplms")) else ())


# The positive control: each model of Table 1 — the server LLM and the three device SLM families —
# LoRA-tuned centrally on all of the heterogeneous setting's training data (the devices' and the server's), at the
# table's budget, against its zero-shot: every task must be learnt by the reference before methods are compared
CONTROL_MODELS = ("tiny-llama", "tiny-gpt2", "tiny-opt", "tiny-bloom")
CONTROL_TASKS = ("sentiment", "entailment", "paraphrase", "topic")     # base.yaml's tasks (a test checks)


# A real LLM: SmolLM2-135M-Instruct in the cloud with its own 3-block DPM, the three tiny device SLMs
# of hetero.yaml, λ = 1, at a 2-core budget (hetero_smollm2.yaml); `--only real/`
REAL = [("standalone", "Standalone"), ("fedcollm", "FedCoLLM"), ("coplms", "Co-PLMs")]
REAL_LLM = "smollm2-135m"
