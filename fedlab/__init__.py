"""fedlab: federated co-tuning of large and small language models."""
from fedlab import idle_threads as _idle_threads
from fedlab import numerics as _numerics

# Pin the CPU kernels (ATen, MKL, oneDNN) to AVX2 before torch is imported, so that the same weights train the
# same way on every x86-64 CPU; FEDLAB_NUMERICS=native opts out (fedlab/numerics.py).
_numerics.apply_env()
# OpenMP's idle threads spin on a free machine and sleep on a busy one (fedlab/idle_threads.py)
_idle_threads.apply()

__version__ = "0.1.0"
