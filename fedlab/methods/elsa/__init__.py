"""ELSA (paper 002; SPEC.md §3): fingerprint trust, latency-aware grouping of clients under edges, split
learning with sketched and perturbed activations, hierarchical aggregation. Built so far (issue 13): trust
(`trust.py`), topology (`topology.py`), grouping (`grouping.py`), the communication model of Eq. 14–15
(`comm_model.py`), the privacy evaluation of Table 4 (`privacy_eval.py`) and one client–edge split step with
the edge as its own party (`split_step.py`) and the hierarchical aggregation (`aggregate.py`); the method is
not registered yet."""
