"""A table's records: the rows a table script plans (`Planned`), one record per (row, seed) in a resumable
`results.json` (`Results`, written atomically after every run, under a lock), what a record holds
(`make_record`) and when it is no longer current (`stale_reason`: another config, other numerics or other zoo
weights made it). The runner (`fedlab.evidence.runner`) makes the records; `fedlab.evidence.merge` takes those made
elsewhere.

A record holds what recomputes a table without MLflow: key, label, setting, seed, the resolved method
config, the final and zero-shot metrics, a per-round summary, the script's own summary, the models' zoo
fingerprints and weights' sha256, the command, the MLflow run id, wall time, fedlab's version and git
commit.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedlab.evidence.stats import fmt_ci
from fedlab.files import file_lock, write_atomic

ROOT = Path(__file__).resolve().parents[2]
# the per-round numbers a record keeps (for learning curves): accuracy and generated-answer Rouge-L of the
# clients, of a server LLM and of a server proxy (`dpm/`), the task loss and the bytes each way
ROUND_KEYS = ("acc/mean", "llm/acc/mean", "loss/task", "bytes/up", "bytes/down", "rougeL/mean", "llm/rougeL/mean",
              "dpm/rougeL/mean", "dpm/acc/mean")


@dataclass(frozen=True)
class Planned:
    """One row of a table before seeds: `key` names it in results.json (the seed is appended)."""
    key: str
    config: str | Path | None
    overrides: tuple[str, ...] = ()
    label: str = ""
    setting: str = ""
    # the run seeds this row is made at, when not the table's: a control made at seeds that no compared row
    # holds, so that choosing a claim's tasks from it reads none of the seeds the claim compares
    seeds: tuple[int, ...] | None = None

    def run_seeds(self, asked: list[int], explicit: bool) -> list[int]:
        """The seeds to make of this row: `asked` (the table's default, or `--seeds` when `explicit`), or the row's
        own `seeds` instead of the default and, of `--seeds`, those among them."""
        if self.seeds is None:
            return list(asked)
        return [s for s in asked if s in self.seeds] if explicit else list(self.seeds)

    def resolve(self, seed: int, extra: tuple[str, ...] = ()):
        """The row's resolved config for one seed, with the trailing overrides `extra` of the command line. The
        row's own input paths are relative to the repository root (as `command` shows them), `extra`'s to the
        working directory."""
        from fedlab.config import load_config, overrides_relative_to

        return load_config(self.config, [*overrides_relative_to(self.overrides, ROOT), *extra, f"seed={seed}"])

    def command(self, seed: int, extra: tuple[str, ...] = ()) -> str:
        cfg = [] if self.config is None else [_rel(self.config)]
        return " ".join(["fedlab run", *cfg, *self.overrides, *extra, f"seed={seed}"])


def _rel(path) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def record_key(key: str, seed: int) -> str:
    return f"{key}@seed{seed}"


class Results:
    """The records of one table script (`results.json`), written atomically after every run."""

    def __init__(self, path: Path):
        self.path = Path(path)
        data = self._read()
        self.meta: dict = data.get("_meta", {})
        self.records: dict[str, dict] = {k: v for k, v in data.items() if k != "_meta"}
        self._loaded = dict(self.records)      # what this object read, to tell its own writes apart
        self._why: dict[tuple[Planned, str], str | None] = {}     # `why_stale`'s answers

    def _read(self) -> dict:
        """The file's records ({} when there is none); a damaged file is one line (`fedlab.files`)."""
        if not self.path.exists():
            return {}
        from fedlab.files import read_json

        return read_json(self.path, None, f"restore it with `git checkout -- {self.path}` (it is committed), or "
                                          "move it aside to record the table afresh", dict,
                         "table records {key@seed: record}")

    def save(self) -> None:
        """Write the records atomically, merged with what is on disk now: records this object added or
        replaced win, every other record (another table process on the same file, e.g. a second `--only`)
        is kept, under an exclusive lock on `<file>.lock`; a new table's folder is made first."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self.path.with_suffix(".lock")):
            disk = self._read()
            mine = {k: v for k, v in self.records.items() if self._loaded.get(k) is not v}
            self.records = {**{k: v for k, v in disk.items() if k != "_meta"}, **mine}
            self.meta = {**disk.get("_meta", {}), **self.meta}
            write_atomic(self.path, json.dumps({"_meta": self.meta, **self.records}, indent=1, sort_keys=False))
            self._loaded = dict(self.records)

    def runs(self, key: str) -> list[dict]:
        """Every seed's record of a row, by seed."""
        rows = [r for r in self.records.values() if r.get("key") == key]
        return sorted(rows, key=lambda r: r.get("seed", 0))

    def values(self, key: str, fn: Callable[[dict], float | None]) -> list[float]:
        return [v for v in (fn(r) for r in self.runs(key)) if v is not None]

    def by_seed(self, key: str, metric: str) -> dict[int, float]:
        """{seed: final[metric]} of a row's records that hold the metric."""
        return {rec["seed"]: rec["final"][metric] for rec in self.runs(key) if metric in rec["final"]}

    def paired(self, a: str, metric_a: str, b: str, metric_b: str | None = None, scale: float = 1.0) -> dict | None:
        """`paired_difference` of scale·metric_a of row a and scale·metric_b of row b over the seeds both
        hold (with their count as "seeds"); None with fewer than two such seeds."""
        x, y = self.by_seed(a, metric_a), self.by_seed(b, metric_b or metric_a)
        seeds = sorted(set(x) & set(y))
        if len(seeds) < 2:
            return None
        from fedlab.evidence.stats import paired_difference

        return {**paired_difference([scale * x[s] for s in seeds], [scale * y[s] for s in seeds]),
                "seeds": len(seeds)}

    def cell(self, key: str, fn: Callable[[dict], float | None], digits: int = 3, shares=None) -> str:
        """'mean ± 95 % half-width' of fn(record) over the row's seeds ('-' when absent), followed by the collapse
        marker of the seeds that hold a value (`fedlab.evidence.collapse`) when `shares` (a record → {task:
        answer share}) says which shares the value rests on."""
        text = fmt_ci(self.values(key, fn), digits)
        if shares is None or text == "-":
            return text
        from fedlab.evidence.collapse import of_records

        return text + of_records([r for r in self.runs(key) if fn(r) is not None], shares).marker()

    def final(self, key: str, metric: str, digits: int = 3) -> str:
        """`cell` of a final metric, with the collapse marker of an accuracy (`collapse.metric_shares`)."""
        from fedlab.evidence.collapse import metric_shares

        return self.cell(key, lambda r: r["final"].get(metric), digits, metric_shares(metric))

    def constant_answers(self, keys: list[str], prefix: str = "", tasks: list[str] | None = None,
                         share: Callable[[str, str], str] | None = None) -> dict[str, str]:
        """Per task: "constant" when every run of every row in `keys` answered it with one constant answer
        (its answer share = 1.0: no row can be told from another on it), "unknown" when some run has no
        answer share (a record made before fedlab logged it); tasks the rows answer variously are left out.
        By default the tasks are those with a `{prefix}acc/task_<t>` score and the share is
        `{prefix}top/task_<t>` of the runs that scored the task; `tasks` and `share(row key, task)` (the metric
        name of the share of the model a row is scored by) name them instead, every run counting."""
        runs = [(k, rec) for k in keys for rec in self.runs(k)]
        scored = tasks is None
        if scored:
            tasks = sorted({m[len(f"{prefix}acc/task_"):] for _, rec in runs for m in rec["final"]
                            if m.startswith(f"{prefix}acc/task_")})
        share = share or (lambda _key, t: f"{prefix}top/task_{t}")
        out = {}
        for t in tasks:
            shares = [rec["final"].get(share(k, t)) for k, rec in runs
                      if not scored or f"{prefix}acc/task_{t}" in rec["final"]]
            if any(s is None for s in shares):
                out[t] = "unknown"
            elif shares and all(s >= 1.0 for s in shares):
                out[t] = "constant"
        return out

    def why_stale(self, p: Planned, rec: dict) -> str | None:
        """`stale_reason` of `rec` (a record of row `p`) against the config `p` resolves to for its seed, asked
        once per row and record content: a page asks it of every record for its marks, its verdicts and what
        the claims lack, and each ask would resolve the config again. A record replaced or changed is asked
        again."""
        key = (p, json.dumps(rec, sort_keys=True, default=str))
        if key not in self._why:
            self._why[key] = stale_reason(rec, p.resolve(rec.get("seed", 0)))
        return self._why[key]

    def stale_and_outdated(self, plan: list[Planned]) -> tuple[set[str], set[str]]:
        """(`stale`, `outdated`) of `plan` in one pass (`why_stale`), for a table that marks the first with † and
        gives no verdict on the second."""
        stale: set[str] = set()
        old: set[str] = set()
        for p in plan:
            for rec in self.runs(p.key):
                why = self.why_stale(p, rec)
                if why is not None:
                    stale.add(p.key)
                    if why == OUTDATED:
                        old.add(p.key)
        return stale, old

    def stale(self, plan: list[Planned]) -> set[str]:
        """Keys of rows with a record made by another config than the one the script would run now (older
        code or YAML), by other weights, or by other numerics (`stale_numerics`): a table marks them instead
        of presenting them as current."""
        return self.stale_and_outdated(plan)[0]

    def outdated(self, plan: list[Planned]) -> set[str]:
        """Keys of rows with a record made by another config than the one the script would run now (`outdated`):
        the subset of `stale` whose numbers answer another question, so a claim on them gets no verdict (records
        stale only by numerics or weights still measure the row's config, and keep theirs)."""
        return {p.key for p in plan for rec in self.runs(p.key) if self.why_stale(p, rec) == OUTDATED}

    def label(self, key: str, default: str = "") -> str:
        runs = self.runs(key)
        return runs[0].get("label", default) if runs else default


def _git_label(env: dict) -> str | None:
    commit = env.get("commit")
    return None if commit is None else commit + ("" if env.get("clean") else "+dirty")


def _numbers(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and not k.startswith("time/")}


def make_record(planned: Planned, seed: int, cfg, history, seconds: float, extra: tuple[str, ...],
                summary: dict | None) -> dict:
    import fedlab
    from fedlab.runtime.federation import run_key

    zero = history.rounds[0] if history.rounds else {}
    return {
        "key": planned.key, "label": planned.label, "setting": planned.setting, "seed": seed,
        "method": cfg.method.name, "method_config": dataclasses.asdict(cfg.method), "model": cfg.model.name,
        "config_hash": run_key(cfg), "final": _numbers(history.final),
        "zero": {k: v for k, v in _numbers(zero).items() if any(m in k for m in ("acc", "rougeL/", "em/", "top/", "top_client_"))},
        "rounds": [{k: r[k] for k in ("round", *ROUND_KEYS) if k in r} for r in history.rounds],
        "headline": history.headline, "summary": summary, "models": history.models,
        "command": planned.command(seed, extra), "run_id": history.run_id, "seconds": round(seconds, 1),
        "fedlab": fedlab.__version__, "git": _git_label(history.environment),
        "environment": {k: v for k, v in history.environment.items() if k != "changed"},
    }


def keep_diff(folder: Path, record: dict, diff: str) -> None:
    """A dirty tree's patch beside the table's records (`diffs/<sha256 prefix>.patch`), named in the record."""
    sha = (record.get("environment") or {}).get("diff_sha256")
    if not diff or not sha:
        return
    path = Path(folder) / "diffs" / f"{sha[:16]}.patch"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(diff)
    record["diff"] = str(path.relative_to(folder))


OUTDATED = "made by another config than the row resolves to now"      # `stale_reason` of an `outdated` record
OTHER_NUMERICS = ("made with other numerics (a CPU kind not measured, another numerics mode or other library "
                  "versions)")


def stale_reason(record: dict, cfg) -> str | None:
    """Why a record is not current for `cfg` on this machine (None when it is): another config made it
    (`outdated`), other numerics (`stale_numerics`) or other zoo weights (`stale_models`). A table re-runs such
    a record, marks it † until then, and `--merge-from` does not take it."""
    if outdated(record, cfg):
        return OUTDATED
    if stale_numerics(record):
        return OTHER_NUMERICS
    if stale_models(record):
        return "made with other zoo weights than a run here would load"
    return None


def outdated(record: dict, cfg) -> bool:
    """A record another config made: its run key differs from `cfg`'s, or a method field they share differs."""
    from fedlab.runtime.federation import run_key

    return record.get("config_hash") != run_key(cfg) or bool(method_drift(record, cfg))


def method_drift(record: dict, cfg) -> list[str]:
    """The method-config fields whose resolved value in `record` differs from what `cfg` resolves to now. The run
    key hashes only non-default fields (a new field with a behaviour-keeping default leaves records current), so
    a changed *default* leaves the key as it was: the record's resolved config tells. Fields the record lacks
    (added since) are not compared."""
    canonical = lambda d: json.loads(json.dumps(d, default=str))      # tuples → lists, as results.json holds them
    then = canonical(record.get("method_config") or {})
    now = canonical(dataclasses.asdict(cfg.method))
    return sorted(k for k in then.keys() & now.keys() if then[k] != now[k])


def numerics_fingerprint(record: dict) -> str | None:
    """The numerics fingerprint a record was made with (`fedlab.numerics.fingerprint`; None where it has none)."""
    return (record.get("environment") or {}).get("numerics_fingerprint")


def stale_numerics(record: dict) -> bool:
    """A record computed by numerics that are neither this process's nor a measured kind's: its numerics
    fingerprint (instruction set in force, numerics mode, torch / transformers / tokenizers versions, and the
    machine's digest where that is not the reference machine's: `fedlab.numerics.fingerprint`) is not this
    process's, nor that of a pinned run on a measured machine kind with these libraries
    (`numerics.measured_fingerprints`: the reference kind and `OTHER_KINDS`), or it has none (made before fedlab
    recorded it). A record of another measured kind is current: its digits reproduce on its own kind
    (`numerics.kind_of`), and the tables read every measured kind's records alike; one whose fingerprint is a
    measured kind's but that `kind_of` cannot name (no digest recorded, made on a CPU other than an AMD EPYC by
    code that wrote the reference's fingerprint on every kind) is stale."""
    from fedlab import numerics

    then = numerics_fingerprint(record)
    here = numerics.current_fingerprint()      # first: a bad FEDLAB_JUDGE_NUMERICS is a ConfigError
    if then in numerics.measured_fingerprints():
        return numerics.kind_of(record.get("environment")) is None
    return then != here


def stale_models(record: dict) -> list[str]:
    """The zoo models a record was made with whose weights differ from the ones a run here would load (the
    shipped weights when they match the current recipe, else the ones built here): its numbers came from other
    weights, so it is stale. That covers a recipe that changed (a ZOO_VERSION bump that builds the same weights
    keeps the record) and the same recipe built on another machine kind before the zoo was shipped (tiny-llama's
    recipe 850b55dd built bcff7e16… on the Intel machines and b125cf01… on the AMD ones). A model neither
    shipped nor built is built first (the run would need it anyway)."""
    from fedlab.models.zoo import ZOO, build, is_built, read_meta

    out = []
    for name, d in (record.get("models") or {}).items():
        if name not in ZOO or not d.get("weights_sha256"):
            continue
        if not is_built(name):
            build(name)
        if read_meta(name).get("weights_sha256") != d["weights_sha256"]:
            out.append(name)
    return out
