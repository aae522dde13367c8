"""Standalone: each client fine-tunes its own LoRA on its own data; nothing is aggregated."""
