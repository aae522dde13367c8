"""FedProxy compression: block influence and block selection by hand, the proxy keeps what it should."""
import pytest
import torch

from fedlab.transforms.compress import (
    block_influence,
    decoder_blocks,
    make_proxy,
    measure_block_influence,
    select_blocks,
)


def test_block_influence_by_hand():
    x0 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    x1 = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    x2 = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    assert torch.allclose(block_influence([x0, x1, x2]), torch.tensor([0.5, 0.5]))
    assert torch.allclose(block_influence([x0, x1, x2], torch.tensor([[1, 0]])), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError):
        block_influence([x0])


def test_select_blocks_by_hand_with_ties():
    bi = torch.tensor([0.3, 0.1, 0.1, 0.5])
    assert select_blocks(bi, 0.5) == [0, 3]         # n = floor(2.5) = 2
    assert select_blocks(bi, 0.3) == [0, 1, 3]      # n = 1; tie 1 vs 2: the lower index is kept
    assert select_blocks(bi, 0.125) == [0, 1, 3]    # n = floor(1.0) = 1
    assert select_blocks(bi, 0.1) == [0, 1, 2, 3]   # n = floor(0.9) = 0
    with pytest.raises(ValueError, match="kappa"):
        select_blocks(bi, 0.9)                       # n = 4: nothing left
    with pytest.raises(ValueError, match="kappa"):
        select_blocks(bi, -0.1)


def test_select_blocks_tie_rule_exact():
    assert select_blocks(torch.tensor([0.2, 0.2, 0.2]), 0.34) == [0, 1]   # n = floor(1.52) = 1: drop index 2


def test_proxy_keeps_selected_blocks_and_runs(pico_zoo):
    from fedlab.models.zoo import load_model

    model, tok = load_model("pico-llama")
    batch = tok(["instruction: tell me about bob. response:", "question: what is 2 plus 3? answer:"],
                return_tensors="pt", padding=True)
    bi = measure_block_influence(model, [batch])
    assert bi.shape == (model.config.num_hidden_layers,) and torch.isfinite(bi).all()
    kept = select_blocks(bi, 0.5)
    proxy = make_proxy(model, kept)
    assert proxy.config.kept_layers == kept and len(decoder_blocks(proxy)) == len(kept)
    assert len(decoder_blocks(model)) == model.config.num_hidden_layers  # the LLM is untouched
    for i, j in enumerate(kept):
        assert torch.equal(decoder_blocks(proxy)[i].mlp.up_proj.weight, decoder_blocks(model)[j].mlp.up_proj.weight)
    out = proxy(**batch).logits
    assert out.shape[-1] == len(tok)
