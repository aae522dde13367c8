"""The embedded benchmark and the partitioners: deterministic, disjoint, covering."""
import collections

import pytest

from fedlab.config import ConfigError, load_config
from fedlab.data.federated import build_federated_data
from fedlab.data.partition import PARTITIONERS, partition
from fedlab.data.tasks import TASKS, privacy_examples, public_examples, task_examples
from fedlab.data.world import DOMAINS, make_world, split_people


def test_world_is_seeded():
    assert make_world(0) == make_world(0)
    assert make_world(0).people != make_world(1).people
    w = make_world(0)
    assert len({p.name for p in w.people}) == len(w.people)
    assert all(p.friend != p.name for p in w.people)


@pytest.mark.parametrize("task", list(TASKS))
def test_tasks_deterministic_and_well_formed(task):
    a = task_examples(task, "train", 30)
    assert a == task_examples(task, "train", 30)
    for e in a:
        if e.is_choice:
            assert e.choices[e.label] == e.target and len(set(e.choices)) == len(e.choices)
            assert len(e.choices) == TASKS[task].n_choices
        assert e.domain in DOMAINS or task == "arithmetic"


def test_train_and_test_people_are_disjoint():
    seen, held = split_people(make_world(0))
    names = lambda people: {p.name for p in people}  # noqa: E731
    assert not names(seen) & names(held)
    train = task_examples("recall", "train", 200)
    test = task_examples("recall", "test", 200)
    assert all(any(n in e.prompt for n in names(seen)) for e in train)
    assert not any(any(f" {n} " in e.prompt for n in names(seen)) for e in test)


def test_ten_domains_public_and_privacy_sets():
    assert len(DOMAINS) >= 10
    pub = public_examples(100)
    assert len({e.domain for e in pub}) >= 8
    priv = privacy_examples(60)
    assert {e.label for e in priv} == {0, 1}
    assert len({e.domain for e in priv if e.label == 1}) >= 5


@pytest.mark.parametrize("kind", sorted(PARTITIONERS))
def test_partitioners_cover_and_are_deterministic(kind):
    pooled = [e for t in ("recall", "sentiment", "topic") for e in task_examples(t, "train", 40)]
    parts = partition(kind, pooled, 3, 0.3, seed=7)
    assert parts == partition(kind, pooled, 3, 0.3, seed=7)
    flat = sorted(i for p in parts for i in p)
    assert flat == list(range(len(pooled)))
    assert all(parts)


def test_by_task_gives_one_task_per_client():
    cfg = load_config(None, ["data.partition=by_task", "data.num_clients=8", "data.train_per_task=10"])
    data = build_federated_data(cfg.data, 0)
    assert [data.client_tasks(c) for c in range(8)] == [[t] for t in cfg.data.tasks]


def test_dirichlet_label_skew_is_skewed():
    pooled = task_examples("sentiment", "train", 400)
    parts = partition("dirichlet_label", pooled, 4, 0.1, seed=1)
    shares = [collections.Counter(pooled[i].target for i in p) for p in parts]
    # with alpha = 0.1 at least one client is dominated by one label
    assert any(max(c.values()) / sum(c.values()) > 0.8 for c in shares)


def test_describe_command(capsys):
    from fedlab.cli import main

    assert main(["data", "describe"]) == 0
    out = capsys.readouterr().out
    for t in TASKS:
        assert t in out
    assert "0.250" in out and "0.500" in out


def test_seen_and_held_out_people_share_every_domain_and_answer():
    """The category task trains on seen people and tests on held-out ones: both sides must cover every
    domain (a split by position put five domains on each side, and fine-tuning then taught answers the
    test never has)."""
    seen, held = split_people(make_world(0))
    assert len(seen) == len(held) == 80
    for attr in ("domain", "city", "color"):
        assert {getattr(p, attr) for p in seen} == {getattr(p, attr) for p in held}, attr
    counts = {d: sum(p.domain == d for p in seen) for d in DOMAINS}
    assert set(counts.values()) == {8}


def test_dirichlet_mix_draws_each_clients_domain_mix():
    pooled = [e for t in ("recall", "sentiment", "topic") for e in task_examples(t, "train", 200)]
    parts = partition("dirichlet_mix", pooled, 3, 0.1, seed=3)
    assert sorted(len(p) for p in parts) == [200, 200, 200]          # equal sizes, no sample shared
    # about 60 samples per domain, so a concentrated client exhausts its domains and spills to its next ones:
    # λ = 0.1 gives each client a few domains, λ = 100 every client all ten
    assert all(len({pooled[i].domain for i in p}) <= 6 for p in parts)
    assert all(len({pooled[i].domain for i in p}) == 10 for p in partition("dirichlet_mix", pooled, 3, 100.0, 3))


def test_domain_matched_test_follows_the_training_mix_by_hand():
    from fedlab.data.partition import domain_matched_test
    from fedlab.data.tasks import Example

    ex = lambda d, i=0: Example(f"p{d}{i}", "t", "task", d)
    train = [ex("a"), ex("a"), ex("a"), ex("b")]
    test = [ex("a", 1), ex("a", 2), ex("b", 1), ex("c", 1), ex("c", 2)]
    got = domain_matched_test(train, test, 10, seed=0)
    assert sorted(e.prompt for e in got) == ["pa1", "pa2", "pb1"]          # never a domain it did not train on
    draws = collections.Counter(e.domain for s in range(200) for e in domain_matched_test(train, test, 1, seed=s))
    assert draws["c"] == 0 and 0.6 < draws["a"] / 200 < 0.9                 # P(a) = 6/7 per item


def test_client_test_per_task_scores_each_client_on_its_own_domains():
    cfg = load_config(None, ["data.tasks=[recall,friend]", "data.partition=dirichlet_mix", "data.alpha=0.1",
                             "data.num_clients=3", "data.train_per_task=60", "data.test_per_task=60",
                             "data.client_test_per_task=20"])
    data = build_federated_data(cfg.data, 0)
    for c in range(3):
        seen = {e.domain for e in data.train[c]}
        own = data.client_test[c]
        assert own and {e.domain for e in own} <= seen and len(own) <= 2 * 20
    with pytest.raises(ConfigError, match="data.client_test_per_task"):
        load_config(None, ["data.client_test_per_task=5", "data.client_test_fraction=0.2"])


def test_mislabeled_clients_get_a_share_of_wrong_answers():
    cfg = load_config(None, ["data.tasks=[sentiment,recall]", "data.partition=iid", "data.num_clients=4",
                             "data.train_per_task=80", "data.mislabeled_clients=[1,3]", "data.mislabel_fraction=0.5"])
    data = build_federated_data(cfg.data, 0)
    clean = build_federated_data(load_config(None, ["data.tasks=[sentiment,recall]", "data.partition=iid",
                                                    "data.num_clients=4", "data.train_per_task=80"]).data, 0)
    for c in range(4):
        wrong = [a for a, b in zip(data.train[c], clean.train[c]) if a.label != b.label]
        assert all(a.target == a.choices[a.label] and a.meta.get("mislabeled") for a in wrong)
        assert (len(wrong) == round(0.5 * len(data.train[c]))) if c in (1, 3) else not wrong
    with pytest.raises(ConfigError, match="data.mislabeled_clients"):
        load_config(None, ["data.num_clients=4", "data.mislabeled_clients=[4]"])


def test_label_skew_with_linear_quantity_skew():
    pooled = task_examples("topic", "train", 2000)
    parts = partition("dirichlet_label_quantity", pooled, 4, 100.0, seed=0)   # α large: sizes alone vary
    sizes = [len(p) for p in parts]
    assert sizes == sorted(sizes) and sizes[3] / sizes[0] == pytest.approx(4, rel=0.2)
    skewed = partition("dirichlet_label_quantity", pooled, 4, 0.1, seed=0)
    top = lambda ps: [max(c.values()) / sum(c.values()) for c in (collections.Counter(pooled[i].target for i in p)
                                                                  for p in ps)]
    assert all(t > 0.2 for t in top(skewed)) and all(t < 0.2 for t in top(parts))   # 10 topics: 0.1 is uniform


def test_test_items_drawn_per_seed_differ_between_seeds_and_repeat_within_one():
    """data.test_draw=per_seed: each run seed scores another sample of the held-out pool, the same
    sample every time for one seed; "fixed" keeps the one sample every record so far was scored on."""
    from fedlab.config import load_config
    from fedlab.data.federated import build_federated_data
    from fedlab.data.tasks import task_examples

    per_seed = load_config(None, ["data.test_draw=per_seed", "data.test_per_task=40"]).data
    fixed = load_config(None, ["data.test_per_task=40"]).data
    prompts = lambda d, s, t: [e.prompt for e in build_federated_data(d, s).test_examples(t)]  # noqa: E731
    for task in ("recall", "arithmetic", "sentiment"):
        a, b = prompts(per_seed, 0, task), prompts(per_seed, 1, task)
        assert a != b and a == prompts(per_seed, 0, task) and len(a) == 40
        assert prompts(fixed, 0, task) == prompts(fixed, 1, task) == [e.prompt for e in task_examples(task, "test", 40)]
    train = {e.prompt for e in build_federated_data(per_seed, 1).train[0]}
    assert not train & set(prompts(per_seed, 1, "recall"))          # still the held-out people


def test_choices_as_text_trains_multiple_choice_answers_as_generated_text(pico_zoo):
    from fedlab.data.collate import encode_example
    from fedlab.models import zoo

    over = ["data.tasks=[topic,food]", "data.num_clients=2", "data.train_per_task=20", "data.test_per_task=5",
            "data.public_source=holdout", "data.public_fraction=0.25"]
    plain = build_federated_data(load_config(None, over).data, 0)
    text = build_federated_data(load_config(None, [*over, "data.choices_as_text=true"]).data, 0)
    flat = [e for part in text.train for e in part] + list(text.public)
    assert any(e.task == "topic" for e in flat) and not any(e.is_choice for e in flat)
    # the same samples, only their choices dropped; the test sets keep theirs (accuracy stays computable)
    assert [e.target for part in text.train for e in part] == [e.target for part in plain.train for e in part]
    assert all(e.is_choice for e in text.test["topic"]) and text.test == plain.test
    tok = zoo.load_tokenizer("pico-llama")
    mc = next(e for part in plain.train for e in part if e.is_choice)
    as_text = next(e for part in text.train for e in part if e.prompt == mc.prompt)
    # trained as a generated answer: the choice's text and then EOS, where the choice alone has no end
    assert encode_example(tok, as_text, 64)["labels"][-1] == tok.eos_token_id
    assert encode_example(tok, mc, 64)["labels"][-1] != tok.eos_token_id
