"""Which model each ELSA party builds (transform chains over the same base encoder) and the facts they
depend on: the split p / q / o, the label space of the classification head, the model's size."""
from __future__ import annotations

from fedlab.methods.elsa import model as _model  # noqa: F401  (registers ELSA's model transforms)
from fedlab.transforms import transform


def model_dims(name: str) -> tuple[int, int]:
    """(blocks M, hidden size D) of an encoder, from its config only (a zoo model is not built for this)."""
    from fedlab.models.zoo import ZOO, resolve

    if name in ZOO:
        spec = ZOO[name]
        c = spec.make_config(spec.vocab_size, 0, 1)
    else:
        from transformers import AutoConfig

        c = AutoConfig.from_pretrained(resolve(name))
    return int(c.num_hidden_layers), int(c.hidden_size)


def default_split(blocks: int) -> tuple[int, int, int]:
    """p = ⌊M/2⌋, q = ⌊M/3⌋, o = M − p − q: BERT-base 6/4/2 (the paper's), MiniLM-L6 and tiny-bert 3/2/1,
    pico-bert 1/1/1."""
    p, q = blocks // 2, blocks // 3
    return p, q, blocks - p - q


def split_of(cfg) -> tuple[int, int, int]:
    if cfg.method.split is not None:
        return tuple(int(x) for x in cfg.method.split)
    return default_split(model_dims(cfg.model.name)[0])


def cuts(cfg) -> tuple[int, int]:
    p, q, _ = split_of(cfg)
    return p, p + q


def label_space(data) -> tuple[str, ...]:
    """Every class name of the experiment's classification tasks (sorted): the head's outputs."""
    names = {c for part in (*data.train, *data.test.values()) for e in part if e.choices for c in e.choices}
    return tuple(sorted(names))


def task_classes(data) -> dict[str, tuple[int, ...]]:
    """For each task, the head outputs its examples may take (the union of their choices)."""
    space = {c: i for i, c in enumerate(label_space(data))}
    out: dict[str, set] = {}
    for part in (*data.train, *data.test.values()):
        for e in part:
            out.setdefault(e.task, set()).update(space[c] for c in e.choices or ())
    return {t: tuple(sorted(s)) for t, s in out.items()}


def num_labels(cfg) -> int:
    from fedlab.data.federated import build_federated_data  # cached per (data config, seed)

    return len(label_space(build_federated_data(cfg.data, cfg.seed)))


def head_of(cfg):
    """The encoder with its classification head (every party's chain starts with it)."""
    return transform("encoder_classifier", num_labels=num_labels(cfg), pooling=cfg.method.pooling)


def full_chain(cfg) -> tuple:
    """The whole model (evaluation, warm-up, the cloud's θ_g): LoRA on every block, head trainable."""
    return (head_of(cfg), transform("encoder_lora", head=True))


def client_chain(cfg) -> tuple:
    """The client's view: front and back blocks and the head; the middle runs on the edge."""
    return (head_of(cfg), transform("remote_middle", cuts=cuts(cfg)),
            transform("encoder_lora", head=True))


def middle_chain(cfg) -> tuple:
    """The edge's view: the middle blocks only."""
    return (head_of(cfg),
            transform("split", cuts=cuts(cfg), part="middle"), transform("encoder_lora", head=False))
