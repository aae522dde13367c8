"""The pretraining corpus of the embedded world: declarative facts about every person, question–answer
text about the colour and food of the 'seen' half, the knowledge tasks' own question formats for one seen
person (or number pair) in three, the two-hop format for every seen person — so zero-shot is above
chance, and fine-tuning still has formats, rules, relations and held-out people to learn — sums, reviews,
domain texts and the public instruction set."""
from __future__ import annotations

import random

from fedlab.data.tasks import _arith_pairs, describe, public_examples, two_hop_prompt
from fedlab.data.world import DOMAIN_WORDS, DOMAINS, FOODS, NEGATIVE, POSITIVE, make_world, split_people


def corpus_lines(world_seed: int = 0) -> list[str]:
    w = make_world(world_seed)
    seen, _ = split_people(w)
    rng = random.Random(f"corpus/{world_seed}")
    lines: list[str] = []
    for p in w.people:
        lines += [
            f"{p.name} lives in {p.city}.",
            f"the favorite color of {p.name} is {p.color}.",
            f"{p.name} likes to eat {p.food}.",
            f"{p.name} works in {p.domain}.",
            f"the friend of {p.name} is {p.friend}.",
            describe(p),
        ]
    for p in seen:
        lines += [
            f"question: what color does {p.name} like? answer: {p.color}",
            f"question: what does {p.name} eat? answer: {p.food}",
        ]
    # the knowledge tasks' own question formats, for one seen person in three only
    for p in seen[::3]:
        lines += [
            f"question: where does {p.name} live? answer: {p.city}",
            f"question: in which field does {p.name} work? answer: {p.domain}",
        ]
    # the two-hop format for every seen person, twice, each time with another neighbour named: the hop
    # (follow the named neighbour, recall their colour) is learnt in pretraining; held-out people's questions
    # need it applied to people the format was never shown with
    for p in seen:
        for f in rng.sample([q for q in w.people if q.name != p.name], 2):
            lines.append(f"{two_hop_prompt(p, f)} {f.color}")
    tr, te = _arith_pairs(world_seed)
    lines += [f"question: what is {a} plus {b}? answer: {a + b}" for a, b in tr[::3]]
    for a, b in tr + te:
        lines.append(f"{a} plus {b} is {a + b}.")
    for _ in range(300):
        d = rng.choice(DOMAINS)
        a, b = rng.sample(DOMAIN_WORDS[d], 2)
        lines.append(f"the {a} and the {b} belong to {d}.")
        adj = rng.choice(POSITIVE + NEGATIVE)
        lines.append(f"the {rng.choice(FOODS)} was {adj}.")
    for ex in public_examples(400, world_seed):
        lines.append(f"{ex.prompt} {ex.target}")
    rng.shuffle(lines)
    return lines
