"""Names of the tasks a config may select (kept import-light: config validation uses it)."""
from fedlab.data.hf import HF_TASKS
from fedlab.data.tasks import TASKS

EMBEDDED_TASKS = list(TASKS)

__all__ = ["EMBEDDED_TASKS", "HF_TASKS"]
