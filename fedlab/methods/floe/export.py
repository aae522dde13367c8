"""What a Floe run leaves for use outside fedlab beside its experts' adapter folders (`fedlab export`): the
router's expert embeddings Γ_j and settings (README (FL-10), (FL-11)), the trained fusion gate (FL-12) when the
run fused with an LLM, and a README saying how the parts combine. The run saves the router's and the gate's
files in its folder (`floe/`) at its end; the export copies them."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

README = """# A Floe run's exported parts

- `expert_<j>/`: expert j of the pool, a PEFT LoRA adapter over the devices' SLM (`manifest.json` names the base).
- `router/`: the parameter-free router (fedlab/methods/floe/README.md (FL-10), (FL-11)).
  `router.safetensors` holds `experts` [M, D], the experts' embeddings Γ_j in the order of the `expert_<j>`
  folders; `router.json` the sentence encoder that embeds a prompt (`encoder`), the softmax `temperature`, the
  `top` experts kept (null: all), and each expert's strongest public task (`domains`).
  A prompt's gate is ω = softmax_j(cos(e(x), Γ_j) / temperature) (top-k renormalised when `top` is set);
  the routed SLM's weights are W + Σ_j ω_j · s·B_j A_j: each expert's LoRA delta weighted by its gate.
  With a trained dense gate (LLM-FedMoE, `kind: dense`) `dense.safetensors` holds its linear layer over e(x).
- `fusion_gate/` (when the run fused with a cloud LLM, (FL-12) – (FL-14)): `gate.safetensors` is the MLP
  w = sigmoid(MLP([P_SLM; P_LLM])) of `fedlab.methods.floe.fusion.FusionGate` (`gate.json`: its input
  `features` and the LLM); P_out = w·P_SLM + (1 − w)·P_LLM per token, the LLM's distribution mapped into the SLM's
  vocabulary when the tokenizers differ, and w = 1 for prompts the privacy detector flags.
"""


def save_router(folder: Path, router, encoder: str, m) -> None:
    """The router's embeddings and settings into the run's folder."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"experts": router.experts.detach().float().contiguous()}, str(folder / "router.safetensors"))
    if router.dense is not None:
        save_file({k: v.detach().contiguous() for k, v in router.dense.state_dict().items()},
                  str(folder / "dense.safetensors"))
    (folder / "router.json").write_text(json.dumps({
        "encoder": encoder, "temperature": m.router_temperature, "top": router.top, "domains": list(router.domains),
        "kind": m.router_kind, "lora_scale": m.lora_scale}, indent=1))


def save_gate(folder: Path, gate, m) -> None:
    """The trained fusion gate's weights and settings into the run's folder."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in gate.state_dict().items()}, str(folder / "gate.safetensors"))
    (folder / "gate.json").write_text(json.dumps({"features": m.fusion_features, "llm": m.llm,
                                                  "tau_wait": m.tau_wait}, indent=1))


def write_extras(method, to: Path, run) -> list[str]:
    """Copy the router's and the gate's files of `run` (its folder) into `to`, with the README; the names
    written."""
    saved = Path(run) / "floe" if run else None
    written = []
    if saved and (saved / "router.safetensors").exists():
        (to / "router").mkdir(parents=True, exist_ok=True)
        for name in ("router.safetensors", "router.json", "dense.safetensors"):
            if (saved / name).exists():
                shutil.copy2(saved / name, to / "router" / name)
        load_file(str(to / "router" / "router.safetensors"))        # a damaged file fails here, not in use
        written.append("router")
    if saved and (saved / "gate.safetensors").exists():
        (to / "fusion_gate").mkdir(parents=True, exist_ok=True)
        for name in ("gate.safetensors", "gate.json"):
            shutil.copy2(saved / name, to / "fusion_gate" / name)
        written.append("fusion_gate")
    (to / "README.md").write_text(README)
    return [*written, "README.md"]
