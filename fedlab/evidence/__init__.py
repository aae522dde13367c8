"""Evidence: from a table's records to the pages a researcher reads.

A table script is a plan of runs and a rendering. The records of its runs (`records`: one per row and seed, in a
resumable `results.json`) are made by `runner`, merged from other machines by `merge`, traced to their source by
`provenance`, and summarised by `stats` (means with intervals, paired differences, minimum detectable effects).
A paper's claims are `claims.Claim`s, each resting on a declared `controls.Control` (the reference that must
learn every task the claim reads); `verdicts` holds the one vocabulary every page uses, `collapse` flags seeds
that answer one class, `forest` draws a system's claims, `page` assembles a system's RESULTS.md and `summary` the
one-row-per-system overview. `spotcheck` re-runs recorded (row, seed) pairs at HEAD and compares them.
"""
from fedlab.evidence.claims import Claim, differences_table
from fedlab.evidence.collapse import metric_shares
from fedlab.evidence.controls import Control, above_chance, above_zero_shot, task_accuracy
from fedlab.evidence.page import System, page
from fedlab.evidence.records import Planned, Results
from fedlab.evidence.runner import TABLE_SEEDS, constant_answer_note, log_to_parent, run_table

__all__ = ["TABLE_SEEDS", "Claim", "Control", "Planned", "Results", "System", "above_chance", "above_zero_shot",
           "constant_answer_note", "differences_table", "log_to_parent", "metric_shares", "page", "run_table", "task_accuracy"]
