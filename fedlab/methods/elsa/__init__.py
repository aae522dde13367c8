"""ELSA (paper 002; SPEC.md §3): fingerprint trust, latency-aware grouping of clients under edges, split
learning with sketched and perturbed activations, hierarchical aggregation. Built so far: trust
(`trust.py`), topology (`topology.py`) and grouping (`grouping.py`); the method itself is issue 13's work."""
