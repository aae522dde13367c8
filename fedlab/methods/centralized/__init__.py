"""Centralized (CentSFT): LoRA on the pooled data of all clients, evaluated on every client's tasks."""
