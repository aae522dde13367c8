"""The embedded tasks: four multiple-choice QA tasks, four classification tasks scored as
multiple choice, generative instruction tasks, the public instruction set and privacy-labelled prompts.

Knowledge tasks train on one half of the people and test on the other, so a test score measures what the
model knows from pretraining plus what fine-tuning taught it about the question format. The three yes/no
classification tasks share one answer vocabulary with different rules, so their LoRA updates conflict."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

from fedlab.data.world import (
    CITIES,
    COLORS,
    DOMAIN_WORDS,
    DOMAINS,
    FOODS,
    NEGATIVE,
    POSITIVE,
    Person,
    World,
    make_world,
    split_people,
)


@dataclass(frozen=True)
class Example:
    """One sample. Multiple choice when `choices` is set (target = choices[label]); generative otherwise."""
    prompt: str
    target: str
    task: str
    domain: str
    choices: Optional[tuple[str, ...]] = None
    label: int = 0
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_choice(self) -> bool:
        return self.choices is not None


def _mc(rng: random.Random, prompt: str, answer: str, pool: list[str], n: int, task: str, domain: str) -> Example:
    distractors = rng.sample([c for c in pool if c != answer], n - 1)
    choices = distractors + [answer]
    rng.shuffle(choices)
    return Example(prompt, answer, task, domain, tuple(choices), choices.index(answer))


def _yesno(prompt: str, yes: bool, task: str, domain: str) -> Example:
    return Example(prompt, "yes" if yes else "no", task, domain, ("yes", "no"), 0 if yes else 1)


# ---------------------------------------------------------------------------------------------------------
# multiple-choice QA
def gen_recall(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    return _mc(rng, f"question: where does {p.name} live? answer:", p.city, CITIES, 4, "recall", p.domain)


def two_hop_prompt(p: Person, f: Person) -> str:
    # a neighbour, not the world's friend relation: any person can be named without contradicting the corpus
    return f"fact: the neighbor of {p.name} is {f.name}. question: what color does the neighbor of {p.name} like? answer:"


def gen_two_hop(w: World, rng: random.Random, people: list[Person]) -> Example:
    """Two hops: the neighbour stated in the prompt (any other person, drawn per question, so the answer
    cannot be memorised per person), then that neighbour's colour (known from pretraining). The person's own
    colour is among the choices whenever it differs, so answering about the person instead of the neighbour
    is wrong."""
    p = rng.choice(people)
    f = rng.choice([q for q in w.people if q.name != p.name])
    others = [c for c in COLORS if c not in (f.color, p.color)]
    distractors = ([p.color] if p.color != f.color else []) + rng.sample(others, 3 - (p.color != f.color))
    choices = distractors + [f.color]
    rng.shuffle(choices)
    return Example(two_hop_prompt(p, f), f.color, "two_hop", p.domain, tuple(choices), choices.index(f.color))


def gen_arithmetic(w: World, rng: random.Random, pairs: list[tuple[int, int]]) -> Example:
    a, b = rng.choice(pairs)
    s = a + b
    pool = [str(x) for x in range(max(0, s - 6), s + 7)]
    return _mc(rng, f"question: what is {a} plus {b}? answer:", str(s), pool, 4, "arithmetic", "finance")


def gen_category(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    return _mc(rng, f"question: in which field does {p.name} work? answer:", p.domain, DOMAINS, 4, "category",
               p.domain)


# ---------------------------------------------------------------------------------------------------------
# classification, scored as multiple choice
def gen_sentiment(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    pos = rng.random() < 0.5
    words = POSITIVE if pos else NEGATIVE
    a, b = rng.sample(words, 2)
    thing = rng.choice(DOMAIN_WORDS[p.domain])
    text = f"review: {p.name} said the {thing} was {a} and the {rng.choice(FOODS)} was {b}."
    return _yesno(f"{text} is the review positive? answer:", pos, "sentiment", p.domain)


def paraphrase_prompt(p: Person, second: str) -> str:
    return f"sentence one: {p.name} lives in {p.city}. sentence two: {second}. same meaning? answer:"


def gen_paraphrase(w: World, rng: random.Random, people: list[Person]) -> Example:
    """Half the pairs say the same in other words ("the home of X is <city>"); the other half differ either
    in a detail (another city: found only by comparing the two sentences) or in what they claim ("X has
    never been to <city>": found from the second sentence's wording) — as in MRPC, whose negatives differ in
    details or in their predicate."""
    p = rng.choice(people)
    same = rng.random() < 0.5
    if same:
        second = f"the home of {p.name} is {p.city}"
    elif rng.random() < 0.5:
        second = f"the home of {p.name} is {rng.choice([c for c in CITIES if c != p.city])}"
    else:
        second = f"{p.name} has never been to {p.city}"
    return _yesno(paraphrase_prompt(p, second), same, "paraphrase", p.domain)


def gen_entailment(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    have = rng.randint(1, 30)
    bound = rng.choice([x for x in range(1, 31) if x != have])
    text = f"premise: {p.name} has {have} coins. hypothesis: {p.name} has more than {bound} coins."
    return _yesno(f"{text} is the hypothesis true? answer:", have > bound, "entailment", p.domain)


def gen_topic(w: World, rng: random.Random, people: list[Person]) -> Example:
    d = rng.choice(DOMAINS)
    a, b = rng.sample(DOMAIN_WORDS[d], 2)
    p = rng.choice(people)
    text = f"text: {p.name} talked about the {a} and the {b}."
    return _mc(rng, f"{text} topic? answer:", d, DOMAINS, 4, "topic", d)


# ---------------------------------------------------------------------------------------------------------
# generative instruction tasks (Rouge-L / exact match)
def describe(p: Person) -> str:
    return f"{p.name} lives in {p.city}, likes {p.food} and works in {p.domain}."


def gen_describe(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    return Example(f"instruction: tell me about {p.name}. response:", describe(p), "describe", p.domain)


def gen_friend(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    return Example(f"instruction: who is the friend of {p.name}? response:", p.friend, "friend", p.domain)


def gen_food(w: World, rng: random.Random, people: list[Person]) -> Example:
    p = rng.choice(people)
    return Example(f"instruction: which food does {p.name} like? response:", f"{p.name} likes {p.food}.", "food",
                   p.domain)


def gen_sum(w: World, rng: random.Random, pairs: list[tuple[int, int]]) -> Example:
    a, b = rng.choice(pairs)
    return Example(f"instruction: add {a} and {b} and say the result. response:", f"{a} plus {b} is {a + b}.",
                   "sum", "finance")


@dataclass(frozen=True)
class TaskSpec:
    name: str
    kind: str                     # "qa" | "classification" | "generative"
    gen: Callable
    n_choices: int                # 0 for generative
    about: str

    @property
    def chance(self) -> float:
        return 1.0 / self.n_choices if self.n_choices else 0.0


TASKS: dict[str, TaskSpec] = {t.name: t for t in [
    TaskSpec("recall", "qa", gen_recall, 4, "city of a person (fact recall)"),
    TaskSpec("two_hop", "qa", gen_two_hop, 4, "favourite colour of a person's neighbour, named in the prompt "
                                                "(two hops: the neighbour, then their colour)"),
    TaskSpec("arithmetic", "qa", gen_arithmetic, 4, "sum of two numbers"),
    TaskSpec("category", "qa", gen_category, 4, "field a person works in (category)"),
    TaskSpec("sentiment", "classification", gen_sentiment, 2, "is a review positive"),
    TaskSpec("paraphrase", "classification", gen_paraphrase, 2, "do two sentences say the same"),
    TaskSpec("entailment", "classification", gen_entailment, 2, "does a premise entail a hypothesis"),
    TaskSpec("topic", "classification", gen_topic, 4, "domain of a short text"),
    TaskSpec("describe", "generative", gen_describe, 0, "describe a person (Rouge-L)"),
    TaskSpec("friend", "generative", gen_friend, 0, "name a person's friend (exact match)"),
    TaskSpec("food", "generative", gen_food, 0, "say which food a person likes, in a sentence"),
    TaskSpec("sum", "generative", gen_sum, 0, "add two numbers and say the result in a sentence"),
]}


def _arith_pairs(world_seed: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    pairs = [(a, b) for a in range(0, 21) for b in range(0, 21)]
    random.Random(f"arith/{world_seed}").shuffle(pairs)
    return pairs[0::2], pairs[1::2]


def task_examples(task: str, split: str, n: int, world_seed: int = 0, draw: int | None = None) -> list[Example]:
    """n examples of `task` for `split` ('train' | 'test'), deterministic in (task, split, n, world_seed) and,
    when given, `draw` (a run seed: another sample of the same pool). Train and test draw on disjoint halves of
    the people (or of the number pairs)."""
    spec = TASKS[task]
    w = make_world(world_seed)
    seen, held = split_people(w)
    rng = random.Random(f"task/{task}/{split}/{world_seed}" + ("" if draw is None else f"/draw{draw}"))
    if task in ("arithmetic", "sum"):
        tr, te = _arith_pairs(world_seed)
        pool = tr if split == "train" else te
    else:
        pool = seen if split == "train" else held
    return [spec.gen(w, rng, pool) for _ in range(n)]


# ---------------------------------------------------------------------------------------------------------
# public instruction set (the Alpaca analogue) and privacy-labelled prompts
def public_examples(n: int, world_seed: int = 0) -> list[Example]:
    """Instruction/response pairs over every domain, about the 'seen' people, with sums and topic texts."""
    w = make_world(world_seed)
    seen, _ = split_people(w)
    rng = random.Random(f"public/{world_seed}")
    tr_pairs, _ = _arith_pairs(world_seed)
    out = []
    for i in range(n):
        kind = i % 4
        p = rng.choice(seen)
        if kind == 0:
            out.append(Example(f"instruction: tell me about {p.name}. response:", describe(p), "public", p.domain))
        elif kind == 1:
            out.append(Example(f"instruction: what does {p.name} like to eat? response:", p.food, "public",
                               p.domain))
        elif kind == 2:
            a, b = rng.choice(tr_pairs)
            out.append(Example(f"instruction: add {a} and {b}. response:", str(a + b), "public", "finance"))
        else:
            d = rng.choice(DOMAINS)
            a, b = rng.sample(DOMAIN_WORDS[d], 2)
            out.append(Example(f"instruction: name the field of a text about the {a} and the {b}. response:",
                               d, "public", d))
    return out


PRIVATE_TEMPLATES = {
    "phone": "my phone number is {d3}-{d3}-{d4}, call me about the {w}.",
    "card": "charge my card {d4} {d4} {d4} {d4} for the {w}.",
    "id": "my national id is {d3}-{d2}-{d4}, please update the {w} record.",
    "email": "send the {w} notes to {name}@mail.com today.",
    "health": "i was diagnosed with a fever and need medicine for the {w}.",
    "finance": "my bank loan and salary are too low to pay for the {w}.",
    "location": "i live at {d2} {name} street near the {w}.",
    "family": "my daughter and my husband argue about the {w}.",
}
PUBLIC_TEMPLATES = [
    "what is the capital city of {city}?",
    "tell me about the {w} in {city}.",
    "how do i cook {food} with a {w}?",
    "write a short song about the {w}.",
    "explain the theory of the {w}.",
]


def privacy_examples(n: int, world_seed: int = 0) -> list[Example]:
    """Prompts labelled private (label 1, domain = the kind of private data) or public (label 0)."""
    w = make_world(world_seed)
    rng = random.Random(f"privacy/{world_seed}")
    words = [x for ws in DOMAIN_WORDS.values() for x in ws]
    out = []
    for i in range(n):
        fill = dict(d2=rng.randint(10, 99), d3=rng.randint(100, 999), d4=rng.randint(1000, 9999),
                    w=rng.choice(words), name=rng.choice(w.people).name, city=rng.choice(CITIES),
                    food=rng.choice(FOODS))
        if i % 2 == 0:
            kind = rng.choice(sorted(PRIVATE_TEMPLATES))
            out.append(Example(PRIVATE_TEMPLATES[kind].format(**fill), "private", "privacy", kind,
                               ("public", "private"), 1))
        else:
            out.append(Example(rng.choice(PUBLIC_TEMPLATES).format(**fill), "public", "privacy", "none",
                               ("public", "private"), 0))
    return out
