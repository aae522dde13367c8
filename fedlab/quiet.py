"""Library chatter that says nothing about the experiment (deprecations, progress bars, Lightning's tips),
silenced once per process. A leaf module: the zoo, the residents and the CLI all call it."""
from __future__ import annotations

import logging
import os
import warnings


def quiet_libraries() -> None:
    import transformers

    warnings.filterwarnings("ignore", message=".*treespec.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*fan_in_fan_out is set to False.*")  # peft on GPT-2's Conv1D
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name in ("lightning.pytorch", "lightning.fabric", "lightning", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
