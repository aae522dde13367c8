"""The federated view of a data config: per-client training partitions, per-task test sets, public set."""
from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from fedlab.data.partition import domain_matched_test, partition
from fedlab.data.tasks import TASKS, Example, public_examples, task_examples
from fedlab.seeding import derive_seed


@dataclass(frozen=True)
class FederatedData:
    train: tuple[tuple[Example, ...], ...]      # per client
    test: dict                                  # task -> tuple[Example, ...]
    public: tuple[Example, ...]
    chance: dict                                # task -> chance accuracy
    client_test: tuple[tuple[Example, ...], ...] | None = None   # per client, when held out of its partition
    mislabeled: tuple[int, ...] = ()            # the clients whose labels were partly flipped

    @property
    def num_clients(self) -> int:
        return len(self.train)

    def client_tasks(self, cid: int) -> list[str]:
        """The tasks a client is scored on: those of its training data (and of its own test split, if any)."""
        seen = []
        for e in self.train[cid] if self.client_test is None else self.client_test[cid]:
            if e.task not in seen:
                seen.append(e.task)
        return [t for t in self.test if t in seen]

    def test_examples(self, task: str, cid: int | None = None) -> list[Example]:
        """A task's test examples: the shared set, or the client's own held-out examples of it."""
        if cid is None or self.client_test is None:
            return list(self.test[task])
        return [e for e in self.client_test[cid] if e.task == task]

    def pooled_train(self) -> tuple[Example, ...]:
        return tuple(e for part in self.train for e in part)

    def sizes(self) -> list[int]:
        return [len(p) for p in self.train]


def _hold_out(pooled: list[Example], fraction: float, seed: int) -> tuple[list[Example], tuple[Example, ...]]:
    """FedMKT Appendix D.2: per task, a random `fraction` of the training data becomes the public set (with
    its labels); the rest stays private. Returns (private pool, public set)."""
    import random

    rng = random.Random(seed)
    private, public = [], []
    for task in dict.fromkeys(e.task for e in pooled):
        rows = [e for e in pooled if e.task == task]
        idx = list(range(len(rows)))
        rng.shuffle(idx)
        n_pub = round(fraction * len(rows))
        chosen = set(idx[:n_pub])
        public += [rows[i] for i in sorted(chosen)]
        private += [rows[i] for i in range(len(rows)) if i not in chosen]
    return private, tuple(public)


def _validation(pooled: list[Example], n: int, seed: int, tasks=None, quotas=None) -> tuple[list[Example], dict]:
    """Per task (of `tasks`; None: every task of the pool), n of its distinct training prompts drawn at random
    (seeded) become that task's evaluation set (one row each) in place of its test set; every training row with
    a held-out prompt leaves the pool (the embedded tasks repeat some questions), the rest stays, in order.
    `quotas` ({task: {answer: rows}}, `answer_quotas` of its test set): such a task's prompts are taken from a
    seeded shuffle in those shares (`_in_shares`). Returns (training pool, {task: rows})."""
    import random

    rng = random.Random(seed)
    held: set[tuple[str, str]] = set()
    sets = {}
    for task in dict.fromkeys(e.task for e in pooled):
        if tasks is not None and task not in tasks:
            continue
        first = {}
        for e in pooled:
            if e.task == task:
                first.setdefault(e.prompt, e)
        prompts = list(first)
        size = min(n, len(prompts) - 1)
        if quotas is not None and task in quotas:
            chosen = _in_shares(rng.sample(prompts, len(prompts)), {p: first[p].target for p in prompts},
                                quotas[task], size)
        else:
            chosen = rng.sample(prompts, size)
        held.update((task, p) for p in chosen)
        sets[task] = tuple(first[p] for p in chosen)
    return [e for e in pooled if (e.task, e.prompt) not in held], sets


def _in_shares(order: list[str], answer: dict[str, str], quota: dict[str, int], size: int) -> list[str]:
    """`size` prompts of `order` (a seeded shuffle) with as many of each answer as `quota` asks, taken in that
    order; where some answer has too few prompts, the rows it leaves go to the answers that still have some, in
    proportion to their quotas (`answer_quotas` again over those), and, once none has, to the others in order.
    Each pass takes at least one prompt, so it ends."""
    chosen: list[str] = []
    taken: set[str] = set()
    room = dict(quota)
    while True:
        for p in order:
            if len(chosen) < size and p not in taken and room.get(answer[p], 0) > 0:
                chosen.append(p)
                taken.add(p)
                room[answer[p]] -= 1
        if len(chosen) == size:
            return chosen
        spare = [a for a, k in quota.items() if k and any(answer[p] == a and p not in taken for p in order)]
        if not spare:
            return chosen + [p for p in order if p not in taken][:size - len(chosen)]
        room = answer_quotas([a for a in spare for _ in range(quota[a])], size - len(chosen))


def _refilled(pooled: list[Example], carved: dict, c: dict) -> list[Example]:
    """The training pool with each task of `carved` (validated on rows held out of its training data) back at
    train_per_task rows: its training draw continued past the first train_per_task rows (the draw is the same
    sequence however long), keeping only rows whose prompt was not held out — the rows it kept come first, in
    order, followed by the next ones the draw makes. Tasks not in `carved` are left as they are."""
    n = c["train_per_task"]
    out = []
    for task in dict.fromkeys(e.task for e in pooled):
        rows = [e for e in pooled if e.task == task]
        if task in carved:
            asked = {e.prompt for e in carved[task]}
            size = 2 * n
            while True:
                rows = [e for e in task_examples(task, "train", size, c["world_seed"]) if e.prompt not in asked]
                if len(rows) >= n or size >= 64 * n:
                    break
                size *= 2
            if len(rows) < n:
                from fedlab.config import ConfigError

                raise ConfigError(f"data.validation_refills_train: {task}'s training population cannot give "
                                  f"{n} rows (data.train_per_task) that ask none of its {len(asked)} held-out "
                                  "prompts; use a smaller data.validation_per_task or data.validation_holdout_per_task")
            rows = rows[:n]
        out += rows
    return out


def answer_quotas(targets: list[str], n: int) -> dict[str, int]:
    """{answer: rows} giving each answer of `targets` its share of `n` rows, n·share rounded down and the rows
    left over to the largest remainders (ties: the answer seen first)."""
    counts = Counter(targets)
    exact = {a: n * k / len(targets) for a, k in counts.items()}
    out = {a: int(x) for a, x in exact.items()}
    for a in sorted(exact, key=lambda a: -(exact[a] - out[a]))[:n - sum(out.values())]:
        out[a] += 1
    return out


def _test_set(c: dict, task: str, seed: int) -> list[Example]:
    """An embedded task's test set as the run scores it: test_per_task items, the same draw in every seed, or
    the seed's own with `data.test_draw: per_seed`."""
    draw = seed if c.get("test_draw", "fixed") == "per_seed" else None
    return task_examples(task, "test", c["test_per_task"], c["world_seed"], draw)


def _held_validation(c: dict, seed: int) -> tuple[dict, dict]:
    """({task: n rows}, {task: why it has none}) for each embedded task: the rows where its held-out population
    (the people, or number pairs, its test items ask about) holds n distinct prompts that no test item of this
    run asks — fresh rows drawn from that population with a draw of their own (seeded), in the order drawn, one
    per prompt; with `validation_keeps_shares`, as many of each answer as its share of the test set gives it
    (`answer_quotas`). A task without them is given why: "crowded" (fewer than n such prompts: its test set asks
    about nearly all of its population) or "shares" (enough prompts, too few of some answer to fill its share)."""
    n, draw = c["validation_per_task"], derive_seed(seed, "validation-held")
    out, why = {}, {}
    for t in c["tasks"]:
        test = _test_set(c, t, seed)
        asked = {e.prompt for e in test}
        room = answer_quotas([e.target for e in test], n) if c.get("validation_keeps_shares") else None
        rows: dict[str, Example] = {}
        fresh = set()
        for e in task_examples(t, "test", 20 * n, c["world_seed"], draw):
            if e.prompt in asked:
                continue
            fresh.add(e.prompt)
            if e.prompt not in rows and (room is None or room.get(e.target, 0) > 0):
                rows[e.prompt] = e
                if room is not None:
                    room[e.target] -= 1
            if len(rows) == n:
                out[t] = tuple(rows.values())
                break
        else:
            why[t] = "shares" if len(fresh) >= n else "crowded"
    return out, why


def _held_for(c: dict, seed: int) -> tuple[dict, dict]:
    """`_held_validation` for a config drawn from held-out populations (`data.validation_from: held`); ({}, {})
    for one validated on its training rows."""
    return _held_validation(c, seed) if c.get("validation_from", "train") == "held" else ({}, {})


def validation_sources(data_cfg, seed: int = 0) -> dict[str, str]:
    """{task: where its validation rows come from}: "held" (fresh rows about the population its test set asks
    about, `data.validation_from: held`, where that population has room) or "train" (held out of its training
    rows); {} when the config is scored on its test sets."""
    c = dataclasses.asdict(data_cfg)
    if c.get("evaluate_on", "test") != "validation":
        return {}
    held = _held_for(c, seed)[0]
    return {t: "held" if t in held else "train" for t in c["tasks"]}


def validation_fallbacks(data_cfg, seed: int = 0) -> dict[str, str]:
    """{task: why it is validated on rows held out of its training data} for each task of a config drawn from
    held-out populations (`data.validation_from: held`) that falls back to them: "crowded" (its test set asks
    about nearly all of its population) or "shares" (the population's fresh rows cannot fill the test set's
    answer shares, `data.validation_keeps_shares`); {} for any other config."""
    c = dataclasses.asdict(data_cfg)
    return _held_for(c, seed)[1] if c.get("evaluate_on", "test") == "validation" else {}


def build_federated_data(data_cfg, seed: int) -> FederatedData:
    # the config's own reading of how many rows a task validated on its training data holds out
    c = {**dataclasses.asdict(data_cfg), "holdout_per_task": data_cfg.holdout_per_task}
    return _build(json.dumps(c, sort_keys=True), seed)


@lru_cache(maxsize=16)
def _build(cfg_json: str, seed: int) -> FederatedData:
    c = json.loads(cfg_json)
    if c["source"] == "embedded":
        pooled = [e for t in c["tasks"] for e in task_examples(t, "train", c["train_per_task"], c["world_seed"])]
        test = {t: tuple(_test_set(c, t, seed)) for t in c["tasks"]
                if c.get("evaluate_on", "test") == "test"}
        chance = {t: TASKS[t].chance for t in c["tasks"]}
    else:
        from fedlab.data.hf import HF_TASKS, hf_examples

        names = c["source"][3:].split("+")        # "hf:<a>+<b>": each a task
        pooled = [e for n in names for e in hf_examples(n, "train", c["train_per_task"], c["hf_dir"], seed)]
        test = {n: tuple(hf_examples(n, "test", c["test_per_task"], c["hf_dir"], seed)) for n in names
                if c.get("evaluate_on", "test") == "test"}
        chance = {n: HF_TASKS[n].chance for n in names}
    if c.get("evaluate_on", "test") == "validation":
        order = list(dict.fromkeys(e.task for e in pooled))
        held = _held_for(c, seed)[0]
        fallback = [t for t in order if t not in held]
        quotas = None
        if c.get("validation_holdout_keeps_shares") and c["source"] == "embedded":
            quotas = {t: answer_quotas([e.target for e in _test_set(c, t, seed)], c["holdout_per_task"])
                      for t in fallback}
        pooled, carved = _validation(pooled, c["holdout_per_task"], derive_seed(seed, "validation"), fallback, quotas)
        if c.get("validation_refills_train"):
            pooled = _refilled(pooled, carved, c)
        test = {t: held[t] if t in held else carved[t] for t in order}
    if c.get("choices_as_text"):      # trained as generated answers (test and validation sets keep their choices)
        pooled = [dataclasses.replace(e, choices=None, label=0) if e.is_choice else e for e in pooled]
    if c.get("public_source", "instructions") == "holdout":
        pooled, public = _hold_out(pooled, c["public_fraction"], derive_seed(seed, "public-holdout"))
    elif c.get("public_path"):
        from fedlab.data.public_file import public_from_file

        public = tuple(public_from_file(c["public_path"], c["public_size"], derive_seed(seed, "public-file")))
    else:
        public = tuple(public_examples(c["public_size"], c["world_seed"]))
    parts = partition(c["partition"], pooled, c["num_clients"], c["alpha"], derive_seed(seed, "partition"),
                      c.get("min_client_samples", 1))
    train = tuple(tuple(pooled[i] for i in idx) for idx in parts)
    bad = tuple(sorted(c.get("mislabeled_clients") or ()))
    if c.get("mislabeled_count", 0):
        bad = draw_mislabeled(train, c["mislabeled_count"], c.get("mislabel_min_share", 0.1),
                              derive_seed(seed, "mislabel-draw"))
    if bad:
        train = tuple(mislabel(part, c["mislabel_fraction"], derive_seed(seed, f"mislabel/{cid}"))
                      if cid in bad else part for cid, part in enumerate(train))
    client_test = None
    if c.get("client_test_fraction", 0.0) > 0:
        train, client_test = _split_clients(train, c["client_test_fraction"], derive_seed(seed, "client-test"))
    elif c.get("client_test_per_task", 0) > 0:
        client_test = _matched_tests(train, test, c["client_test_per_task"], derive_seed(seed, "client-test"))
    return FederatedData(train=train, test=test, public=public, chance=chance, client_test=client_test,
                         mislabeled=bad)


def class_counts(part) -> list[int]:
    """How many of a client's samples each of its (task, answer) classes holds, largest first."""
    from collections import Counter

    return sorted(Counter((e.task, e.target) for e in part).values(), reverse=True)


def second_class_share(part) -> float:
    """The share of a client's samples in its second most frequent (task, answer) class (0: one class)."""
    counts = class_counts(part)
    return counts[1] / len(part) if len(counts) >= 2 else 0.0


def multi_class_clients(train, min_share: float) -> list[int]:
    """The clients whose second most frequent (task, answer) class holds ≥ `min_share` of their samples."""
    return [cid for cid, part in enumerate(train) if second_class_share(part) >= min_share]


def draw_mislabeled(train, count: int, min_share: float, seed: int) -> tuple[int, ...]:
    """`count` clients drawn at random (seeded) among `multi_class_clients`: flipping labels of a client that
    holds one class, or two samples, does not make a client with wrong labels worth detecting. When fewer
    than `count` clients reach `min_share`, all of them are taken and the rest are the clients with the next
    largest second-class shares (still two classes each)."""
    import numpy as np

    pool = multi_class_clients(train, min_share)
    rng = np.random.default_rng(seed)
    if len(pool) >= count:
        return tuple(sorted(int(c) for c in rng.choice(pool, size=count, replace=False)))
    share = {c: second_class_share(p) for c, p in enumerate(train)}
    rest = sorted((c for c in share if c not in pool and share[c] > 0), key=lambda c: (-share[c], c))
    if len(pool) + len(rest) < count:
        raise ValueError(f"data.mislabeled_count: {count} clients asked for, but only {len(pool) + len(rest)} hold "
                         "two classes (lower data.mislabeled_count)")
    return tuple(sorted(pool + rest[:count - len(pool)]))


def mislabel(part, fraction: float, seed: int) -> tuple:
    """A client's samples with round(fraction·m) of its m multiple-choice ones answered by another choice,
    drawn at random (seeded); generative samples are kept as they are."""
    import random

    rng = random.Random(seed)
    choice = [i for i, e in enumerate(part) if e.is_choice and len(e.choices) > 1]
    flip = set(rng.sample(choice, round(fraction * len(choice))))
    out = []
    for i, e in enumerate(part):
        if i in flip:
            label = rng.choice([j for j in range(len(e.choices)) if j != e.label])
            e = dataclasses.replace(e, label=label, target=e.choices[label], meta={**e.meta, "mislabeled": True})
        out.append(e)
    return tuple(out)


def _matched_tests(train, test: dict, n: int, seed: int):
    """Per client, for each task it trains on, up to n items of that task's shared test set drawn with the
    client's training domain mix (`fedlab.data.partition.domain_matched_test`)."""
    out = []
    for cid, part in enumerate(train):
        tasks = list(dict.fromkeys(e.task for e in part))
        out.append(tuple(e for t in tasks for e in domain_matched_test(
            [x for x in part if x.task == t], list(test[t]), n, derive_seed(seed, f"{cid}/{t}"))))
    return tuple(out)


def _split_clients(train, fraction: float, seed: int):
    """Each client's partition split into (training, test) at random, round(fraction·n) held out for the test
    and at least one example kept for training."""
    import random

    rng = random.Random(seed)
    kept, held = [], []
    for part in train:
        idx = list(range(len(part)))
        rng.shuffle(idx)
        n = min(round(fraction * len(part)), len(part) - 1)
        test = set(idx[:n])
        kept.append(tuple(e for i, e in enumerate(part) if i not in test))
        held.append(tuple(e for i, e in enumerate(part) if i in test))
    return tuple(kept), tuple(held)
