"""ZeroShot: the base model as is — no training, one evaluation."""
from fedlab.methods.zeroshot.config import ZeroShotConfig
from fedlab.registry import register_method

register_method("zeroshot", ZeroShotConfig, "fedlab.methods.zeroshot.method:ZeroShot")
