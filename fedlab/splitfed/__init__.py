"""Split learning inside hierarchical FL: the building blocks of ELSA (paper 002), kept apart from the
method package that drives them (`fedlab.methods.elsa`): fingerprint trust (`trust.py`), topology
(`topology.py`), grouping of clients under edges (`grouping.py`), the communication model of Eq. 14–15
(`comm_model.py`), the privacy evaluation of Table 4 (`privacy_eval.py`), one client–edge split step with
the edge as its own party (`split_step.py`) and the hierarchical aggregation (`aggregate.py`)."""
