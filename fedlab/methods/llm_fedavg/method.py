"""LLM-FedAvg (Floe's baseline, paper 003 §V): FedAvg of the SLM's LoRA (equal weights), and at the end the
cloud LLM proxy-tuned by it — logits = LLM(x) + SLM_LoRA(x) − SLM(x) (Mitchell et al.'s proxy tuning), no LLM
weight changes. The devices are scored every round as in FedAvg; the proxy-tuned LLM once, at the end, on
every client's tasks (`llm/*`), beside the zero-shot LLM (`llm_zeroshot/*`)."""
from __future__ import annotations

from torch import nn

from fedlab.eval.tasks import evaluate_server_model
from fedlab.methods.fedavg.method import FedAvg
from fedlab.transforms import set_state
from fedlab.transforms.fusion import ProxyTuned


class WithoutAdapter(nn.Module):
    """A peft model with its adapters disabled: the base SLM (shares the weights, costs no copy)."""

    def __init__(self, peft_model):
        super().__init__()
        self.peft_model = peft_model

    def forward(self, **kwargs):
        with self.peft_model.disable_adapter():
            return self.peft_model(**kwargs)


def same_vocabulary(tok_a, tok_b) -> bool:
    return tok_a.get_vocab() == tok_b.get_vocab()


def check_shared_tokenizer(llm: str, slm: str) -> None:
    """Proxy tuning adds logits token by token: the LLM must share the SLM's tokenizer (one line otherwise)."""
    from fedlab.config import ConfigError
    from fedlab.models.zoo import load_tokenizer

    if not same_vocabulary(load_tokenizer(llm), load_tokenizer(slm)):
        raise ConfigError(f"method.llm: {llm!r} does not share the tokenizer of model.name {slm!r}; proxy tuning "
                          "adds logits token by token")


class LLMFedAvg(FedAvg):
    def __init__(self, cfg, data):
        super().__init__(cfg, data)
        check_shared_tokenizer(cfg.method.llm, cfg.model.name)     # before anything is written or trained

    def finalize(self, ctx) -> dict:
        from fedlab.models.zoo import load_model

        llm, llm_tok = load_model(self.cfg.method.llm)
        llm.eval()
        res = self.resident
        set_state(res.model, self.global_state)
        res.model.eval()
        out = evaluate_server_model(llm, llm_tok, self.data, self.cfg, "llm_zeroshot/")
        proxy = ProxyTuned(llm, res.model, WithoutAdapter(res.model))
        return {**out, **evaluate_server_model(proxy, llm_tok, self.data, self.cfg, "llm/")}
