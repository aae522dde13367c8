"""Model → model transforms that declare what they make trainable and what is communicated, registered
by name (`register_transform`) so that a method names them in its instructions and any process builds
them; plus the block-influence kernels of FedProxy's compression (fedlab/methods/fedproxy/README.md (FP-1),
(FP-2))."""
from fedlab.transforms.adapters import Adapter
from fedlab.transforms.compress import block_influence, make_proxy, select_blocks
from fedlab.transforms.lora import AdapterSpec, apply_lora, get_state, set_state
from fedlab.transforms.registry import (
    Build,
    Transform,
    chain_from_wire,
    chain_to_wire,
    register_transform,
    transform,
    transform_names,
)
from fedlab.transforms.split import run_part

__all__ = ["Adapter", "AdapterSpec", "Build", "Transform", "apply_lora", "block_influence", "chain_from_wire",
           "chain_to_wire", "get_state", "make_proxy", "register_transform", "select_blocks", "set_state",
           "run_part", "transform", "transform_names"]
