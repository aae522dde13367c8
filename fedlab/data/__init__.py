"""Data: the embedded synthetic benchmark, Hugging Face adapters, partitioners, collators."""
from fedlab.data.tasks import TASKS, Example, privacy_examples, public_examples, task_examples

__all__ = ["TASKS", "Example", "task_examples", "public_examples", "privacy_examples"]
