"""ELSA's trained model for use outside fedlab (`fedlab export`): the client's, the edge's and the cloud's parts
joined into the whole model θ_g, its LoRA merged into the encoder's weights, written as a Hugging Face encoder
folder (`encoder/`, loaded by `transformers.AutoModel`) with the classification head beside it (`head/`) and a
README of how the two combine. The split, the rotation and the sketch are how the parts train and talk; the
model they train is this one."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from safetensors.torch import save_file

README = """# An ELSA run's exported model

ELSA trains one BERT-family classifier in three parts (client front and back blocks, edge middle blocks, head);
this folder holds the whole trained model θ_g with its LoRA merged into the weights:

- `encoder/`: the encoder, a Hugging Face folder (`AutoModel.from_pretrained("encoder")`, with its tokenizer).
- `head/`: `head.safetensors` (`weight` [C, D], `bias` [C]) and `head.json` (`pooling`, `num_labels`).

logits = weight · pool(H) + bias, where H = encoder(input_ids, attention_mask).last_hidden_state and pool is
the mean of H over the attended positions (`pooling: mean`, Σ_t m_t H_t / Σ_t m_t) or H[:, 0] (`pooling: cls`);
fedlab/methods/elsa/README.md states the equations.
"""


def write_merged(method, to: Path) -> list[str]:
    """The whole model of the method's global state, merged, into `to`; the names written."""
    from fedlab.methods.elsa.chains import full_chain
    from fedlab.methods.elsa.model import root_of
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms.lora import set_state

    res = get_resident(method.cfg, chain=full_chain(method.cfg))
    set_state(res.model, method.global_state)
    whole = root_of(copy.deepcopy(res.model).merge_and_unload())
    to = Path(to)
    whole.bert.save_pretrained(to / "encoder")
    res.tokenizer.save_pretrained(to / "encoder")
    (to / "head").mkdir(parents=True, exist_ok=True)
    save_file({"weight": whole.classifier.weight.detach().contiguous(),
               "bias": whole.classifier.bias.detach().contiguous()}, str(to / "head" / "head.safetensors"))
    (to / "head" / "head.json").write_text(json.dumps({"pooling": whole.pooling,
                                                       "num_labels": whole.classifier.out_features}, indent=1))
    (to / "README.md").write_text(README)
    return ["encoder", "head", "README.md"]
