"""Floe's on-device privacy detector: a prompt flagged as sensitive never reaches the
cloud LLM.

Stage 1 — patterns and words: regular expressions for phone numbers, payment-card numbers, id-like numbers
(letters then 6–9 digits) and e-mail addresses; keyword lists for health, finance, location and family.
Stage 2 — meaning: the prompt's sentence embedding (MiniLM, mean-pooled and normalised; the paper uses
BGE-base) against one centroid per domain {health, finance, legal, location, profile}; flagged when the best
cosine is strictly above τ. `pooling="static"` embeds with the encoder's input word embeddings alone (the
mean over the prompt's tokens, no transformer layer), a fraction of a millisecond per prompt. Centroids are the mean embeddings of a few descriptions written per domain
(`DOMAIN_SEEDS`) and τ maximises F1 on a labelled validation split (`PrivacyDetector.fit`).

The keyword lists below were written from the categories' names and common vocabulary; they are not tuned
on the benchmark's test prompts (`fedlab.data.privacy_prompts`), whose phrasings differ from the
validation prompts used for the centroids and τ."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

import torch

PATTERNS = {   # tried in this order: the specific shapes before the phone number's loose one
    "email": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
    "card": re.compile(r"\b(?:\d{4}[\s-]?){3}\d{1,4}\b"),
    "id_number": re.compile(r"\b[A-Za-z]{1,2}\d{6,9}\b"),
    "phone": re.compile(r"(?:\+\d{1,3}[\s-]?)?(?:\(?\d{2,4}\)?[\s-]?){2,4}\d{3,4}\b"),
}

# whole words, with an optional plural or verb ending ("loan" matches "loans", not "pineapple" for "pin");
# a word ending in * is a stem ("pregnan*": pregnant, pregnancy)
KEYWORDS = {
    "health": ["diagnosed", "diagnosis", "doctor", "clinic", "hospital", "therapist", "therapy", "medication",
               "pills", "prescription", "surgery", "pregnan*", "cancer", "diabetes", "depression", "anxiety",
               "blood test", "insulin", "symptom"],
    "finance": ["salary", "bank", "account", "debt", "loan", "mortgage", "credit", "card", "tax", "income",
                "savings", "pin", "installment", "bonus", "invoice"],
    "location": ["my address", "i live at", "my house", "my apartment", "my home", "home alone", "at home",
                 "spare key", "pick me up at"],
    "family": ["my wife", "my husband", "my son", "my daughter", "my kids", "my children", "my ex",
               "my mother", "my father", "custody", "divorce", "my family"],
}

DOMAINS = ("health", "finance", "legal", "location", "profile")

# stage 2's centroids: the mean embedding of a few first-person descriptions per domain, written for the
# domain (not taken from the benchmark's prompts)
DOMAIN_SEEDS = {
    "health": ["i am worried about my illness and my treatment", "my medical condition and my medicine",
               "the results of my health check", "my mental health and how i feel"],
    "finance": ["my money, my bank and what i owe", "my personal income and my expenses",
                "a payment from my own account", "my credit and my loans"],
    "legal": ["my court case and my lawyer", "a legal dispute i am involved in",
              "the police and a crime i was part of", "a contract or lawsuit against me"],
    "location": ["where i live and my home address", "the place i am right now",
                 "how to find my house", "my daily route from home"],
    "profile": ["my personal contact details and identity", "my family members and their contacts",
                "my identity document and its number", "private messages to my relatives"],
}


@dataclass(frozen=True)
class Detection:
    flagged: bool
    stage: int | None            # 1 (pattern or keyword), 2 (embedding), None (not flagged)
    reason: str | None           # e.g. "phone", "keyword:health", "embedding:legal"
    score: float | None = None   # stage 2's best cosine (None when stage 1 decided)


def _keyword_rx(words: list[str]) -> re.Pattern:
    alts = [re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w) + r"(?:s|es|ed|ing)?" for w in words]
    return re.compile(r"\b(?:" + "|".join(alts) + r")\b")


KEYWORD_RX = {domain: _keyword_rx(words) for domain, words in KEYWORDS.items()}


def stage1(text: str) -> str | None:
    """The first pattern or keyword list that matches `text` (its name), else None."""
    for name, rx in PATTERNS.items():
        if rx.search(text):
            return name
    low = text.lower()
    for domain, rx in KEYWORD_RX.items():
        if rx.search(low):
            return f"keyword:{domain}"
    return None


class PrivacyDetector:
    def __init__(self, encoder=None, tokenizer=None, centroids: dict[str, torch.Tensor] | None = None,
                 tau: float = 1.0, pooling: str = "contextual"):
        if pooling not in ("contextual", "static"):
            raise ValueError(f"pooling: {pooling!r} is not allowed; allowed: contextual, static")
        self.encoder, self.tokenizer, self.pooling = encoder, tokenizer, pooling
        self.centroids = centroids or {}
        self.tau = float(tau)

    def _embed(self, texts: list[str]) -> torch.Tensor:
        from fedlab.models.zoo import sentence_embeddings, static_embeddings

        embed = static_embeddings if self.pooling == "static" else sentence_embeddings
        return embed(self.encoder, self.tokenizer, texts)

    def scores(self, texts: list[str]) -> tuple[torch.Tensor, list[str]]:
        """[N] best cosine to a domain centroid and the domain it belongs to."""
        names = sorted(self.centroids)
        cent = torch.stack([self.centroids[n] for n in names])
        sims = self._embed(texts) @ cent.T
        best, idx = sims.max(dim=1)
        return best, [names[i] for i in idx.tolist()]

    def detect_many(self, texts: list[str]) -> list[Detection]:
        first = [stage1(t) for t in texts]
        out: list[Detection | None] = [Detection(True, 1, r) if r else None for r in first]
        rest = [i for i, d in enumerate(out) if d is None]
        if rest and self.centroids:
            best, domains = self.scores([texts[i] for i in rest])
            for i, s, d in zip(rest, best.tolist(), domains):
                out[i] = Detection(True, 2, f"embedding:{d}", s) if s > self.tau else Detection(False, None, None, s)
        return [d if d is not None else Detection(False, None, None) for d in out]

    def detect(self, text: str) -> Detection:
        return self.detect_many([text])[0]

    @classmethod
    def fit(cls, encoder, tokenizer, prompts, seeds: dict[str, list[str]] | None = None,
            pooling: str = "contextual") -> PrivacyDetector:
        """Centroids from the domain descriptions (`DOMAIN_SEEDS`); τ the F1-best threshold on the labelled
        validation `prompts` among the cut points of their stage-2 scores."""
        from sklearn.metrics import f1_score

        det = cls(encoder, tokenizer, pooling=pooling)
        for d, texts in (seeds or DOMAIN_SEEDS).items():
            det.centroids[d] = torch.nn.functional.normalize(det._embed(list(texts)).mean(0), dim=0)
        emb = det._embed([p.text for p in prompts])
        names = sorted(det.centroids)
        best = (emb @ torch.stack([det.centroids[n] for n in names]).T).max(dim=1).values
        first = [stage1(p.text) is not None for p in prompts]
        truth = [p.sensitive for p in prompts]
        cuts = sorted(set(best.tolist()))
        candidates = [(a + b) / 2 for a, b in zip(cuts, cuts[1:])] + [cuts[-1]]
        scored = []
        for tau in candidates:
            pred = [f or s > tau for f, s in zip(first, best.tolist())]
            scored.append((f1_score(truth, pred, zero_division=0), tau))
        det.tau = max(scored, key=lambda x: (x[0], x[1]))[1]
        return det


def evaluate_detector(detector: PrivacyDetector, prompts) -> dict:
    """Precision, recall and F1 of `detector` on labelled prompts (all, and per stage-1/2 share), recall per
    category and kind, and the latency per prompt (ms, one prompt at a time)."""
    from sklearn.metrics import precision_recall_fscore_support

    latencies, found = [], []
    for p in prompts:
        t0 = time.perf_counter()
        found.append(detector.detect(p.text))
        latencies.append(1000 * (time.perf_counter() - t0))
    truth = [p.sensitive for p in prompts]
    pred = [d.flagged for d in found]
    prec, rec, f1, _ = precision_recall_fscore_support(truth, pred, average="binary", zero_division=0)
    out = {"precision": float(prec), "recall": float(rec), "f1": float(f1), "tau": detector.tau,
           "flagged_stage1": sum(d.stage == 1 for d in found), "flagged_stage2": sum(d.stage == 2 for d in found),
           "false_positives": sum(f and not t for f, t in zip(pred, truth)), "n": len(prompts),
           "latency_ms_mean": sum(latencies) / len(latencies),
           "latency_ms_p95": sorted(latencies)[int(0.95 * (len(latencies) - 1))],
           "stage1_latency_ms_mean": _stage1_latency(prompts)}
    for key in sorted({p.category for p in prompts if p.sensitive} | {p.kind for p in prompts if p.sensitive}):
        rows = [i for i, p in enumerate(prompts) if p.sensitive and key in (p.category, p.kind)]
        out[f"recall/{key}"] = sum(pred[i] for i in rows) / len(rows)
    return out


def _stage1_latency(prompts) -> float:
    t0 = time.perf_counter()
    for p in prompts:
        stage1(p.text)
    return 1000 * (time.perf_counter() - t0) / len(prompts)


def guarded_call(prompt: str, detector: PrivacyDetector, llm_call):
    """(the LLM's answer or None, the detection): `llm_call(prompt)` runs only when the prompt is not flagged."""
    d = detector.detect(prompt)
    return (None if d.flagged else llm_call(prompt)), d
