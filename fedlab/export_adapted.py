"""A model with fedlab's bottleneck adapters inside its blocks (FedAP's, Co-PLMs' domain adapters:
`fedlab.transforms.adapters`) as a Hugging Face folder that `AutoModelForCausalLM.from_pretrained(DIR,
trust_remote_code=True)` loads: the weights (LoRA merged in, the adapters' beside the base's), a config naming the
modules that carry an adapter, and `modeling_fedlab_adapters.py`, a subclass of the base architecture that puts
the same adapters back on those modules. No Hugging Face architecture has these modules, so the folder brings its
own code, as any custom architecture on the Hub does; it needs transformers and torch only, not fedlab."""
from __future__ import annotations

from pathlib import Path

CODE = "modeling_fedlab_adapters.py"

MODELING = '''"""fedlab's bottleneck adapters on a __BASE__ (written by `fedlab export`): after each module named in
config.fedlab_adapters["modules"], h <- h + W2 GeLU(W1 h + b1) + b2 (fedlab/transforms/adapters.py)."""
import torch
from torch import nn
from transformers import __BASE__


class Adapter(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.down = nn.Linear(dim, hidden)
        self.up = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.up(nn.functional.gelu(self.down(x)))


def _hook(module, args, output):
    if isinstance(output, tuple):
        return (module.fedlab_adapter(output[0]), *output[1:])
    return module.fedlab_adapter(output)


class Fedlab__BASE__(__BASE__):
    def __init__(self, config):
        super().__init__(config)
        spec = config.fedlab_adapters
        for path in spec["modules"]:
            module = self.get_submodule(path)
            module.fedlab_adapter = Adapter(spec["dim"], spec["hidden"])
            module.register_forward_hook(_hook)
'''


def hosts(model) -> list[str]:
    """The names of the modules that carry a fedlab adapter, in module order."""
    from fedlab.transforms.adapters import Adapter

    return [n for n, m in model.named_modules() if isinstance(getattr(m, "fedlab_adapter", None), Adapter)]


def save_adapted(model, tokenizer, folder: Path) -> None:
    """Write `model` (a plain Hugging Face model carrying fedlab adapters, LoRA already merged) into `folder`."""
    names = hosts(model)
    first = model.get_submodule(names[0]).fedlab_adapter
    base = type(model).__name__
    model.config.fedlab_adapters = {"modules": names, "dim": first.down.in_features, "hidden": first.down.out_features}
    model.config.auto_map = {"AutoModelForCausalLM": f"{CODE[:-3]}.Fedlab{base}"}
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (Path(folder) / CODE).write_text(MODELING.replace("__BASE__", base))
