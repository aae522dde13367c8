"""Model transforms: specs, their wire form, and the keys a built model declares."""
from __future__ import annotations

import pytest

from conftest import PICO
from fedlab.transforms import Transform, chain_from_wire, chain_to_wire, transform
from fedlab.transforms.registry import seed_part


def test_a_spec_is_positional_in_the_declared_order():
    t = transform("proxy", lora_layers=[1], kept_layers=[0, 2, 3])
    assert t == Transform("proxy", ((0, 2, 3), (1,)))
    assert t.kwargs() == {"kept_layers": (0, 2, 3), "lora_layers": (1,)}
    assert transform("proxy", kept_layers=[0, 2], lora_layers=None) == Transform("proxy", ((0, 2),))
    assert str(transform("proxy", kept_layers=[0, 2])) == "('proxy', (0, 2))"


def test_wire_form_round_trips():
    one = (transform("proxy", kept_layers=[0, 2]),)
    assert chain_to_wire(one) == ["proxy", [0, 2]]          # a chain of one is written as that transform
    two = (*one, transform("lora", r=4))
    assert chain_to_wire(two) == [["proxy", [0, 2]], ["lora", 4]]
    for chain in (one, two, ()):
        assert chain_from_wire(chain_to_wire(chain)) == chain
    assert seed_part(()) is None and seed_part(one) == ("proxy", (0, 2))


def test_bad_specs_fail_with_the_allowed_names():
    with pytest.raises(ValueError, match=r"unknown parameters \['kept'\]; declared: \['kept_layers', 'lora_layers'\]"):
        transform("proxy", kept=[0])
    with pytest.raises(ValueError, match="unknown model transform 'prune'; registered: .*proxy"):
        transform("prune")


def _cfg(*extra):
    from fedlab.config import load_config

    return load_config(None, [*PICO, "tracking.enabled=false", *extra])


def test_proxy_declares_its_blocks_and_lora_goes_where_it_says(pico_zoo):
    from fedlab.runtime.resident import clear_residents, get_resident
    from fedlab.transforms.compress import decoder_blocks

    clear_residents()
    res = get_resident(_cfg(), chain=(transform("proxy", kept_layers=[0, 2, 3], lora_layers=[2]),))
    assert sorted(res.keys) == ["block/0", "block/1", "block/2"]
    blocks = decoder_blocks(res.model)
    names = {id(p): n for n, p in res.model.named_parameters()}
    for pos in range(3):
        lora = {n for n, p in blocks[pos].named_parameters() if "lora_" in n}
        base = [names[id(p)] for n, p in blocks[pos].named_parameters() if "lora_" not in n]
        assert list(res.keys[f"block/{pos}"]) == base            # the base weights, in the model's order
        assert bool(lora) == (pos == 2)                          # LoRA on proxy position 2 only
    assert all(".layers.2." in k for k in res.spec.trainable) and res.spec.trainable == res.spec.communicated


def test_lora_rank_per_instruction(pico_zoo):
    from fedlab.runtime.resident import get_resident

    r4 = get_resident(_cfg(), chain=(transform("lora", r=4),))
    r8 = get_resident(_cfg())
    a4 = [v for k, v in r4.init_state.items() if "lora_A" in k][0]
    a8 = [v for k, v in r8.init_state.items() if "lora_A" in k][0]
    assert a4.shape[0] == 4 and a8.shape[0] == 8 and a4.shape[1] == a8.shape[1]
    assert r4 is get_resident(_cfg(), chain=(transform("lora", r=4),))   # one resident per chain


@pytest.mark.parametrize("model,where", [("pico-llama", "block"), ("pico-gpt2", "attn_ffn")])
def test_adapters_start_as_the_base_model_and_declare_their_keys(pico_zoo, model, where):
    import torch

    from fedlab.runtime.resident import clear_residents, get_resident

    cfg = _cfg(f"model.name={model}")
    clear_residents()       # residents are shared within a process: another test may have left weights in one
    base = get_resident(cfg)
    res = get_resident(cfg, chain=(transform("adapters", width=0.5, where=where),))
    n_blocks = 4 if model == "pico-llama" else 2
    per_block = 1 if where == "block" else 2
    assert len(res.keys["adapters"]) == 4 * per_block * n_blocks          # W1, b1, W2, b2 per adapter
    assert not set(res.keys["adapters"]) & set(res.spec.trainable)        # LoRA keys stay LoRA's
    dim = res.model.config.hidden_size
    shapes = {tuple(p.shape) for n, p in res.model.named_parameters() if n in res.keys["adapters"]}
    assert (dim // 2, dim) in shapes and (dim, dim // 2) in shapes
    x = torch.randint(5, 200, (2, 12), generator=torch.Generator().manual_seed(0))
    base.model.eval()        # the residents are shared within a process: another test may have left one training
    res.model.eval()
    with torch.no_grad():
        assert torch.equal(res.model(input_ids=x).logits, base.model(input_ids=x).logits)   # W2 = 0
        params = dict(res.model.named_parameters())
        params[[k for k in res.keys["adapters"] if k.endswith("up.bias")][0]].fill_(0.1)
        assert not torch.equal(res.model(input_ids=x).logits, base.model(input_ids=x).logits)
    with pytest.raises(ValueError, match="where='nowhere' is not allowed"):
        get_resident(cfg, chain=(transform("adapters", where="nowhere"),))


def _three_block_copy(name: str, folder) -> str:
    """A local Hugging Face folder: the pico model's architecture with three blocks (random weights) and its
    tokenizer — three parts need at least three blocks."""
    from transformers import AutoModelForCausalLM

    from fedlab.models import zoo

    model, tok = zoo.load_model(name)
    cfg = model.config
    for key in ("num_hidden_layers", "n_layer"):
        if hasattr(cfg, key):
            setattr(cfg, key, 3)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("name", ["pico-llama", "pico-gpt2", "pico-bloom"])
def test_split_parts_compose_to_the_whole_model_forward_and_backward(pico_zoo, name, tmp_path):
    """front → middle → back (three parties, activations and their gradients passed by hand) computes the
    whole model's logits and the same gradients for the front's blocks."""
    import torch

    from fedlab.config import load_config
    from fedlab.models import zoo
    from fedlab.runtime.resident import clear_residents, get_resident
    from fedlab.transforms import run_part, transform

    zoo.build(name, progress=False)
    if name != "pico-llama":   # 2-block pico models: a 3-block copy of the architecture
        name = _three_block_copy(name, tmp_path / name)
    clear_residents()
    cfg = load_config(None, [f"model.name={name}", "model.lora.dropout=0.0"])
    cuts = (1, 3) if name == "pico-llama" else (1, 2)
    parts = {p: get_resident(cfg, name, chain=(transform("split", cuts=cuts, part=p),)) for p in
             ("front", "middle", "back")}
    whole = get_resident(cfg, name)
    assert parts["middle"].keys["part"] and not any("h.0." in k or "layers.0." in k for k in parts["middle"].keys["part"])
    # the same LoRA values everywhere (B ≠ 0 so LoRA matters): copy the whole model's state into each part
    with torch.no_grad():
        for n, p in whole.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    for res in parts.values():
        own = dict(res.model.named_parameters())
        with torch.no_grad():
            for n, p in whole.model.named_parameters():
                if n in own and "lora" in n:
                    own[n].copy_(p)
    ids = torch.tensor([[5, 9, 12, 7, 3], [4, 8, 2, 6, 1]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    a = run_part(parts["front"].model, mask, input_ids=ids)
    a_in = a.detach().requires_grad_(True)
    b = run_part(parts["middle"].model, mask, hidden=a_in)
    b_in = b.detach().requires_grad_(True)
    logits = run_part(parts["back"].model, mask, hidden=b_in).logits
    full = whole.model(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(logits, full, atol=1e-5)
    # backward through the three parties: the back sends d loss / d b, the middle sends d loss / d a
    logits[mask.bool()].sum().backward()
    b.backward(b_in.grad)
    a.backward(a_in.grad)
    full[mask.bool()].sum().backward()
    front = dict(parts["front"].model.named_parameters())
    got = [(n, p.grad) for n, p in whole.model.named_parameters() if n in front and p.requires_grad and front[n].requires_grad]
    assert got and all(torch.allclose(front[n].grad, g, atol=1e-5) for n, g in got)
    with pytest.raises(ValueError, match="cuts"):
        get_resident(cfg, name, chain=(transform("split", cuts=(3, 1), part="front"),))
