"""Public-set knowledge transfer between models of different tokenizers (fedlab/methods/fedmkt/README.md
(FM-2) – (FM-8)): `PublicSet`, `public_knowledge`, `Aligner`, `distill_items`, `DistillCollator`, a
per-process `StudentView` that clients of one model share, and `train_distill`."""
from fedlab.knowledge.public import (
    Aligner,
    DistillCollator,
    PublicSet,
    distill_items,
    kept_by_task,
    public_knowledge,
    student_next,
)
from fedlab.knowledge.train import train_distill
from fedlab.knowledge.view import StudentView, student_view

__all__ = ["Aligner", "DistillCollator", "PublicSet", "StudentView", "distill_items", "kept_by_task", "public_knowledge",
           "student_next", "student_view", "train_distill"]
