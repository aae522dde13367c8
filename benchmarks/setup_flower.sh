#!/usr/bin/env bash
# A separate environment for the Flower comparison of benchmarks/round_overhead.py: flwr[simulation] pins
# its own Ray version, so it is installed here and never into the project's environment.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv benchmarks/.venv-flower
. benchmarks/.venv-flower/bin/activate
pip install -q torch==2.13.0
pip install -q -e . "flwr[simulation]==1.41.0" psutil
python -c "import flwr, ray, fedlab; print('flwr', flwr.__version__, 'ray', ray.__version__)"
