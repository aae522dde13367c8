"""fedlab: federated co-tuning of large and small language models."""
__version__ = "0.1.0"
