"""Labelled privacy prompts of the embedded benchmark (Floe's on-device privacy detector).

A prompt is *sensitive* when it carries private information about the user or someone they know, in one
of five categories (health, finance, legal, location, profile — contacts, identity numbers, family);
otherwise it is an ordinary request about the benchmark's world (people, cities, food, arithmetic).
Sensitive prompts are of two kinds: with a pattern stage 1 can match (a phone number, card number,
id-like number or e-mail address) and without one (only words: "my therapist said my anxiety …").

Templates come in two disjoint sets: `validation` (for choosing the stage-2 threshold τ) and `test` (scored).
The detector's keyword lists (fedlab.privacy.detector) were written while the validation templates existed
and then frozen; the test templates were written afterwards, with phrasings absent from the validation ones.
Both are by the same authors, so stage 1's recall on them is an optimistic estimate."""
from __future__ import annotations

import random
from dataclasses import dataclass

from fedlab.data.world import CITIES, DOMAINS, FOODS, make_world


@dataclass(frozen=True)
class PrivacyPrompt:
    text: str
    sensitive: bool
    category: str | None          # health | finance | legal | location | profile | None
    kind: str                     # pattern | words | benign


_SENSITIVE = {
    "validation": {
        "health": ["i was diagnosed with diabetes last week, what should {name} cook for me?",
                   "my doctor changed my insulin dose, remind me before dinner",
                   "the clinic says my blood test is bad, should i tell {name}?",
                   "my therapist thinks my anxiety is getting worse since the surgery",
                   "which pills can i take with my heart medication",
                   "{name} should not know about my pregnancy yet"],
        "finance": ["my salary is 4200 a month and my debt keeps growing, help me plan",
                    "transfer 300 from my savings account to {name}",
                    "my card {card} was declined at the shop in {city}",
                   "my bank refused the mortgage, what income do i need",
                   "pay the loan installment with card {card}",
                   "how much tax do i owe on my 30000 bonus"],
        "legal": ["my lawyer says the court hearing about my divorce is next week",
                  "i got arrested in {city} last year, will it show on my record?",
                  "the police report about my accident names {name} as witness",
                   "draft a reply to the lawsuit my landlord filed against me",
                   "my probation officer in {city} wants a meeting",
                   "can my ex take the kids if the custody case goes badly"],
        "location": ["i live at 14 {street} street in {city}, how far is the market?",
                     "i am home alone at 12 {street} road tonight",
                     "pick me up at my house on {street} avenue at 7",
                   "my apartment is 3 {street} lane in {city}, send the package there",
                   "the spare key is under the mat at my address on {street} way",
                   "track my phone, i left it at home on {street} close"],
        "profile": ["call my wife at {phone} and tell her i am late",
                    "my passport number is {idnum}, fill in the form",
                    "send my daughter's school report to {email}",
                   "text my son on {phone} that dinner is ready",
                   "my national id is {idnum}, is it still valid",
                   "forward my private mail to {email} please"],
    },
    "test": {
        "health": ["my cholesterol came back high and i feel dizzy since the new treatment",
                   "should {name} know that i see a psychiatrist every week",
                   "book me a scan, the lump on my neck is growing"],
        "finance": ["i owe {name} 900 and my rent is late again",
                    "use the visa {card} for the hotel in {city}",
                    "my paycheck barely covers the car payments, what can i cut"],
        "legal": ["the judge postponed my trial until march",
                  "i signed a settlement after the accident in {city}, can i still appeal",
                  "my landlord is suing me over the deposit"],
        "location": ["i am staying at room 214 of the hotel on {street} road in {city}",
                     "my flat is above the bakery on {street} street, come after 9",
                     "i walk home through {street} park alone every night"],
        "profile": ["my mum's number is {phone}, remind me to call her",
                    "here is my social security number {idnum}",
                    "my sister's mail is {email}, send her the photos"],
    },
}

_BENIGN = {
    "validation": ["question: where does {name} live? answer:", "what is {a} plus {b}?",
                   "describe {city} in one sentence", "is {food} tasty with rice?",
                   "who works in {domain} in {city}?", "give me a recipe with {food}"],
    "test": ["question: in which field does {name} work? answer:", "what is {a} times {b}?",
             "name a famous dish from {city}", "summarise: {name} likes {food} and {domain}.",
             "which city is warmer, {city} or {city2}?", "tell me a fact about {domain}"],
}

_STREETS = ["oak", "pine", "river", "hill", "mill", "lake", "park", "elm"]


def _fill(rng: random.Random, template: str, names: list[str]) -> str:
    digits = lambda n: "".join(str(rng.randrange(10)) for _ in range(n))
    return template.format(
        name=rng.choice(names), city=rng.choice(CITIES), city2=rng.choice(CITIES), food=rng.choice(FOODS),
        domain=rng.choice(DOMAINS), street=rng.choice(_STREETS), a=rng.randrange(2, 40), b=rng.randrange(2, 40),
        phone=f"+{digits(2)} {digits(3)} {digits(3)} {digits(4)}",
        card=" ".join(digits(4) for _ in range(4)),
        idnum=f"{rng.choice('ABCDEFGH')}{digits(8)}",
        email=f"{rng.choice(names)}{rng.randrange(10, 99)}@mail.example")


def privacy_prompts(split: str, per_template: int = 6, seed: int = 0) -> list[PrivacyPrompt]:
    """The labelled prompts of `split` (validation | test): every template filled `per_template` times; about
    as many benign prompts as sensitive ones."""
    if split not in _SENSITIVE:
        raise ValueError(f"privacy_prompts: split {split!r} is not allowed; allowed: test, validation")
    rng = random.Random(f"privacy-prompts/{split}/{seed}")
    names = [p.name for p in make_world(seed).people]
    out = []
    for category, templates in _SENSITIVE[split].items():
        for t in templates:
            kind = "pattern" if any(f in t for f in ("{phone}", "{card}", "{idnum}", "{email}")) else "words"
            out += [PrivacyPrompt(_fill(rng, t, names), True, category, kind) for _ in range(per_template)]
    n_benign = len(out)
    benign = _BENIGN[split]
    out += [PrivacyPrompt(_fill(rng, benign[i % len(benign)], names), False, None, "benign") for i in range(n_benign)]
    rng.shuffle(out)
    return out
