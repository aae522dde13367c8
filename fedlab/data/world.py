"""The seeded synthetic world: people with attributes, a friend relation and a field of work
(the domain), from which the corpus, the public instruction set and the tasks are generated."""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

DOMAINS = ["science", "sports", "music", "cooking", "travel", "finance", "health", "law", "art", "farming"]
# words that mark each domain's texts (topic task, domain-skewed instruction data)
DOMAIN_WORDS = {
    "science": ["atom", "lab", "theory", "experiment", "cell", "physics"],
    "sports": ["match", "goal", "team", "coach", "score", "stadium"],
    "music": ["song", "guitar", "concert", "melody", "drum", "choir"],
    "cooking": ["recipe", "oven", "spice", "bread", "kitchen", "flavor"],
    "travel": ["ticket", "train", "hotel", "map", "journey", "harbor"],
    "finance": ["bank", "loan", "stock", "budget", "coin", "profit"],
    "health": ["doctor", "medicine", "fever", "clinic", "nurse", "sleep"],
    "law": ["court", "judge", "contract", "lawyer", "verdict", "rule"],
    "art": ["painting", "brush", "canvas", "museum", "sketch", "statue"],
    "farming": ["tractor", "wheat", "barn", "harvest", "soil", "cattle"],
}
COLORS = ["red", "blue", "green", "yellow", "purple", "orange", "black", "white"]
CITIES = ["paris", "tokyo", "cairo", "lima", "oslo", "delhi", "rome", "quito", "seoul", "dakar"]
FOODS = ["soup", "rice", "pasta", "salad", "cheese", "apples", "beans", "fish"]
POSITIVE = ["great", "wonderful", "tasty", "lovely", "excellent", "pleasant", "superb", "fine"]
NEGATIVE = ["awful", "terrible", "bland", "horrible", "poor", "nasty", "dreadful", "bad"]
NUMBER_WORDS = [str(i) for i in range(0, 41)]

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "n", "r", "l", "k", "s", "x"]


@dataclass(frozen=True)
class Person:
    name: str
    color: str
    city: str
    food: str
    domain: str
    friend: str  # another person's name


@dataclass(frozen=True)
class World:
    seed: int
    people: tuple[Person, ...]

    def by_name(self, name: str) -> Person:
        return _index(self)[name]


@lru_cache(maxsize=8)
def _index(world: World) -> dict[str, Person]:
    return {p.name: p for p in world.people}


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(2)) + rng.choice(_CODAS)


@lru_cache(maxsize=8)
def make_world(seed: int = 0, n_people: int = 160) -> World:
    """The world for a seed: `n_people` people with unique names, attributes drawn uniformly, each
    person's friend another person (a random derangement), domains balanced."""
    rng = random.Random(f"world/{seed}")
    names: list[str] = []
    seen = set(COLORS + CITIES + FOODS + DOMAINS + POSITIVE + NEGATIVE)
    while len(names) < n_people:
        n = _name(rng)
        if n not in seen:
            seen.add(n)
            names.append(n)
    order = list(range(n_people))
    rng.shuffle(order)
    friend_of = {order[i]: order[(i + 1) % n_people] for i in range(n_people)}
    people = tuple(
        Person(name=names[i], color=rng.choice(COLORS), city=rng.choice(CITIES), food=rng.choice(FOODS),
               domain=DOMAINS[i % len(DOMAINS)], friend=names[friend_of[i]])
        for i in range(n_people)
    )
    return World(seed=seed, people=people)


@lru_cache(maxsize=8)
def _split(world: World) -> tuple[tuple[Person, ...], tuple[Person, ...]]:
    rng = random.Random(f"split/{world.seed}")
    seen, held = [], []
    for d in DOMAINS:   # half of every domain's people on each side, so no answer belongs to one side only
        members = [p for p in world.people if p.domain == d]
        rng.shuffle(members)
        seen += members[: len(members) // 2]
        held += members[len(members) // 2:]
    order = {p.name: i for i, p in enumerate(world.people)}
    return tuple(sorted(seen, key=lambda p: order[p.name])), tuple(sorted(held, key=lambda p: order[p.name]))


def split_people(world: World) -> tuple[list[Person], list[Person]]:
    """Half the people are 'seen' (their question–answer text is in the corpus), half 'held out': a seeded
    split that halves every domain (a split by position would put all of a domain's people on one side,
    since domains are assigned in turn)."""
    seen, held = _split(world)
    return list(seen), list(held)
