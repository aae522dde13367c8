"""Every method, registered with one explicit call each."""
from fedlab.methods.centralized import Centralized, CentralizedConfig
from fedlab.methods.fedavg import FedAvg, FedAvgConfig
from fedlab.methods.fedprox import FedProx, FedProxConfig
from fedlab.methods.standalone import Standalone, StandaloneConfig
from fedlab.methods.zeroshot import ZeroShot, ZeroShotConfig
from fedlab.registry import register_method

register_method("zeroshot", ZeroShotConfig, ZeroShot)
register_method("standalone", StandaloneConfig, Standalone)
register_method("centralized", CentralizedConfig, Centralized)
register_method("fedavg", FedAvgConfig, FedAvg)
register_method("fedprox", FedProxConfig, FedProx)
