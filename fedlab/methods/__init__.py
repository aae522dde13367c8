"""Every method, registered with one explicit call each. Configs are imported here (light); method
classes are named as "module:Class" and imported on first use, so validating a config loads no model
library."""
from fedlab.methods.centralized.config import CentralizedConfig
from fedlab.methods.fedavg.config import FedAvgConfig
from fedlab.methods.fedmkt.config import FedMKTConfig, LLM2SLMConfig
from fedlab.methods.fedprox.config import FedProxConfig
from fedlab.methods.fedproxy.config import (
                                            FedBiOTConfig,
                                            FedOTETConfig,
                                            FedProxyConfig,
                                            OffsiteConfig,
                                            OTConfig,
                                            TiesConfig,
)
from fedlab.methods.standalone.config import StandaloneConfig
from fedlab.methods.zeroshot.config import ZeroShotConfig
from fedlab.registry import register_method

register_method("zeroshot", ZeroShotConfig, "fedlab.methods.zeroshot.method:ZeroShot")
register_method("standalone", StandaloneConfig, "fedlab.methods.standalone.method:Standalone")
register_method("centralized", CentralizedConfig, "fedlab.methods.centralized.method:Centralized")
register_method("fedavg", FedAvgConfig, "fedlab.methods.fedavg.method:FedAvg")
register_method("fedprox", FedProxConfig, "fedlab.methods.fedprox.method:FedProx")
register_method("fedproxy", FedProxyConfig, "fedlab.methods.fedproxy.method:FedProxy")
register_method("ties", TiesConfig, "fedlab.methods.fedproxy.method:FedProxy")
register_method("ot", OTConfig, "fedlab.methods.fedproxy.offsite:OffsiteTuning")
register_method("fedot", OffsiteConfig, "fedlab.methods.fedproxy.offsite:OffsiteTuning")
register_method("fedbiot", FedBiOTConfig, "fedlab.methods.fedproxy.offsite:OffsiteTuning")
register_method("fedot_et", FedOTETConfig, "fedlab.methods.fedproxy.offsite:OffsiteTuning")
register_method("fedmkt", FedMKTConfig, "fedlab.methods.fedmkt.method:FedMKT")
register_method("llm2slm", LLM2SLMConfig, "fedlab.methods.fedmkt.method:FedMKT")
