"""Adapters from Hugging Face data sets to fedlab's prompt/choices/label form, selected by
`data.source=hf:<name>`. Rows come from the Hub (`datasets.load_dataset`) or, offline, from
`data.hf_dir/<name>/{train,test}.jsonl` holding rows shaped like the Hub's."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from fedlab.data.tasks import Example

LETTERS = "ABCDEFGH"


def _mcq(name: str, question: str, choices: dict, key: str) -> Example:
    texts, labels = list(choices["text"]), [str(x) for x in choices["label"]]
    key = str(key)
    if key not in labels and key.isdigit():  # some ARC rows use 1-4 for A-D
        key = LETTERS[int(key) - 1] if labels and labels[0] == "A" else key
    label = labels.index(key)
    return Example(f"question: {question} answer:", texts[label], name, name, tuple(texts), label)


def arc(name: str) -> Callable[[dict], Example]:
    return lambda r: _mcq(name, r["question"], r["choices"], r["answerKey"])


def openbookqa(r: dict) -> Example:
    return _mcq("openbookqa", r["question_stem"], r["choices"], r["answerKey"])


def commonsense_qa(r: dict) -> Example:
    return _mcq("commonsense_qa", r["question"], r["choices"], r["answerKey"])


def _cls(name: str, prompt: str, choices: tuple[str, ...], label: int) -> Example:
    if not 0 <= label < len(choices):
        raise ValueError(f"{name}: label {label} outside 0..{len(choices) - 1} (unlabelled test rows?)")
    return Example(prompt, choices[label], name, name, choices, label)


def sst2(r: dict) -> Example:
    return _cls("sst2", f"review: {r['sentence'].strip()} sentiment:", ("negative", "positive"), int(r["label"]))


def mrpc(r: dict) -> Example:
    return _cls("mrpc", f"sentence one: {r['sentence1']} sentence two: {r['sentence2']} same meaning? answer:",
                ("no", "yes"), int(r["label"]))


def rte(r: dict) -> Example:  # GLUE RTE: 0 = entailment
    return _cls("rte", f"premise: {r['sentence1']} hypothesis: {r['sentence2']} is the hypothesis true? answer:",
                ("yes", "no"), int(r["label"]))


def mnli(r: dict) -> Example:  # 0 entailment, 1 neutral, 2 contradiction
    return _cls("mnli", f"premise: {r['premise']} hypothesis: {r['hypothesis']} is the hypothesis true? answer:",
                ("yes", "maybe", "no"), int(r["label"]))


def boolq(r: dict) -> Example:
    label = r["answer"] if "answer" in r else r["label"]
    return _cls("boolq", f"passage: {r['passage']} question: {r['question']}? answer:", ("no", "yes"),
                int(bool(label)))


def wic(r: dict) -> Example:
    return _cls("wic", f"sentence one: {r['sentence1']} sentence two: {r['sentence2']} does '{r['word']}' mean "
                       "the same in both? answer:", ("no", "yes"), int(r["label"]))


def mmlu(r: dict) -> Example:
    """MMLU (cais/mmlu, config "all"): a four-choice question; its domain is the subject (57 of them)."""
    choices = tuple(str(c) for c in r["choices"])
    label = int(r["answer"])
    if not 0 <= label < len(choices):
        raise ValueError(f"mmlu: answer {label} outside 0..{len(choices) - 1}")
    listed = " ".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
    return Example(f"question: {r['question'].strip()} choices: {listed} answer:", choices[label], "mmlu",
                   str(r["subject"]), choices, label)


def sni(r: dict) -> Example:
    """Super-NaturalInstructions (Muennighoff/natural-instructions): instruction + input → output, generative
    (Rouge-L / EM); its domain is the SNI task the row comes from."""
    target = r["targets"] if isinstance(r["targets"], str) else r["targets"][0]
    return Example(f"instruction: {r['definition'].strip()} input: {r['inputs'].strip()} output:", str(target).strip(),
                   "sni", str(r["task_name"]))


# BIG-Bench Hard's two-answer subtasks (Floe's evaluation benchmark, paper 003), scored as multiple choice over
# their two answers as written in the data set; lukaemon/bbh has one split, so fedlab trains on its first 60 %
# and tests on the rest
BBH_BINARY = {"boolean_expressions": ("False", "True"), "causal_judgement": ("No", "Yes"),
              "formal_fallacies": ("invalid", "valid"), "navigate": ("No", "Yes"),
              "sports_understanding": ("no", "yes"), "web_of_lies": ("No", "Yes")}


def bbh(sub: str) -> Callable[[dict], Example]:
    choices = BBH_BINARY[sub]

    def adapt(r: dict) -> Example:
        target = str(r["target"]).strip()
        if target not in choices:
            raise ValueError(f"bbh_{sub}: target {target!r} is not one of {choices}")
        return _cls(f"bbh_{sub}", f"question: {r['input'].strip()} answer:", choices, choices.index(target))
    return adapt


# ELSA's eight data sets (paper 002): four text classifications, two NLI, two reading-comprehension tasks
AG_NEWS = ("world", "sports", "business", "science and technology")
EMOTION = ("sadness", "joy", "love", "anger", "fear", "surprise")
TREC_COARSE = ("abbreviation", "entity", "description", "human", "location", "number")
# PolyAI/banking77's 77 intents, in the order of its ClassLabel names
BANKING77 = (
    "activate_my_card", "age_limit", "apple_pay_or_google_pay", "atm_support", "automatic_top_up",
    "balance_not_updated_after_bank_transfer", "balance_not_updated_after_cheque_or_cash_deposit",
    "beneficiary_not_allowed", "cancel_transfer", "card_about_to_expire", "card_acceptance", "card_arrival",
    "card_delivery_estimate", "card_linking", "card_not_working", "card_payment_fee_charged",
    "card_payment_not_recognised", "card_payment_wrong_exchange_rate", "card_swallowed", "cash_withdrawal_charge",
    "cash_withdrawal_not_recognised", "change_pin", "compromised_card", "contactless_not_working", "country_support",
    "declined_card_payment", "declined_cash_withdrawal", "declined_transfer", "direct_debit_payment_not_recognised",
    "disposable_card_limits", "edit_personal_details", "exchange_charge", "exchange_rate", "exchange_via_app",
    "extra_charge_on_statement", "failed_transfer", "fiat_currency_support", "get_disposable_virtual_card",
    "get_physical_card", "getting_spare_card", "getting_virtual_card", "lost_or_stolen_card", "lost_or_stolen_phone",
    "order_physical_card", "passcode_forgotten", "pending_card_payment", "pending_cash_withdrawal", "pending_top_up",
    "pending_transfer", "pin_blocked", "receiving_money", "Refund_not_showing_up", "request_refund",
    "reverted_card_payment?", "supported_cards_and_currencies", "terminate_account", "top_up_by_bank_transfer_charge",
    "top_up_by_card_charge", "top_up_by_cash_or_cheque", "top_up_failed", "top_up_limits", "top_up_reverted",
    "topping_up_by_card", "transaction_charged_twice", "transfer_fee_charged", "transfer_into_account",
    "transfer_not_received_by_recipient", "transfer_timing", "unable_to_verify_identity", "verify_my_identity",
    "verify_source_of_funds", "verify_top_up", "virtual_card_not_working", "visa_or_mastercard",
    "why_verify_identity", "wrong_amount_of_cash_received", "wrong_exchange_rate_for_cash_withdrawal")
BANKING77_CHOICES = tuple(n.lower().replace("_", " ").rstrip("?") for n in BANKING77)


def ag_news(r: dict) -> Example:
    return _cls("ag_news", f"news: {r['text'].strip()} topic:", AG_NEWS, int(r["label"]))


def banking77(r: dict) -> Example:
    return _cls("banking77", f"query: {r['text'].strip()} intent:", BANKING77_CHOICES, int(r["label"]))


def emotion(r: dict) -> Example:
    return _cls("emotion", f"message: {r['text'].strip()} emotion:", EMOTION, int(r["label"]))


def trec(r: dict) -> Example:
    """TREC question classification, the six coarse classes (CogComp/trec `coarse_label`)."""
    label = r["coarse_label"] if "coarse_label" in r else r["label-coarse"]
    return _cls("trec", f"question: {r['text'].strip()} the answer is a:", TREC_COARSE, int(label))


def cb(r: dict) -> Example:  # SuperGLUE CB: 0 entailment, 1 contradiction, 2 neutral
    return _cls("cb", f"premise: {r['premise']} hypothesis: {r['hypothesis']} is the hypothesis true? answer:",
                ("yes", "no", "maybe"), int(r["label"]))


def multirc(r: dict) -> Example:
    """SuperGLUE MultiRC: one (paragraph, question, candidate answer) row, is the answer correct (binary)."""
    return _cls("multirc", f"paragraph: {r['paragraph']} question: {r['question']} candidate answer: {r['answer']} "
                           "is it correct? answer:", ("no", "yes"), int(r["label"]))


def squad(r: dict) -> Example:
    """SQuAD v1.1: context + question → the first gold answer span, generative (Rouge-L / EM)."""
    answers = r["answers"]["text"]
    if not answers:
        raise ValueError("squad: a row without an answer (SQuAD v2's unanswerable questions are not supported)")
    return Example(f"context: {r['context'].strip()} question: {r['question'].strip()} answer:",
                   str(answers[0]).strip(), "squad", "squad")


@dataclass(frozen=True)
class HFTask:
    name: str
    hub_id: str
    hub_config: Optional[str]
    splits: dict            # fedlab split -> hub split
    adapt: Callable[[dict], Example]
    n_choices: int          # 0: generative (scored by Rouge-L / EM)

    @property
    def chance(self) -> float:
        return 1.0 / self.n_choices if self.n_choices else 0.0


HF_TASKS: dict[str, HFTask] = {t.name: t for t in [
    HFTask("arc_easy", "allenai/ai2_arc", "ARC-Easy", {"train": "train", "test": "test"}, arc("arc_easy"), 4),
    HFTask("arc_challenge", "allenai/ai2_arc", "ARC-Challenge", {"train": "train", "test": "test"},
           arc("arc_challenge"), 4),
    HFTask("openbookqa", "allenai/openbookqa", "main", {"train": "train", "test": "test"}, openbookqa, 4),
    HFTask("commonsense_qa", "tau/commonsense_qa", None, {"train": "train", "test": "validation"},
           commonsense_qa, 5),
    HFTask("sst2", "nyu-mll/glue", "sst2", {"train": "train", "test": "validation"}, sst2, 2),
    HFTask("mrpc", "nyu-mll/glue", "mrpc", {"train": "train", "test": "validation"}, mrpc, 2),
    HFTask("rte", "nyu-mll/glue", "rte", {"train": "train", "test": "validation"}, rte, 2),
    HFTask("mnli", "nyu-mll/glue", "mnli", {"train": "train", "test": "validation_matched"}, mnli, 3),
    HFTask("boolq", "google/boolq", None, {"train": "train", "test": "validation"}, boolq, 2),
    HFTask("wic", "aps/super_glue", "wic", {"train": "train", "test": "validation"}, wic, 2),
    # Co-PLMs' two data sets (paper 004): MMLU's test split (14k rows, every subject) trains, its validation
    # split tests; SNI's train and test splits as published
    HFTask("mmlu", "cais/mmlu", "all", {"train": "test", "test": "validation"}, mmlu, 4),
    HFTask("sni", "Muennighoff/natural-instructions", None, {"train": "train", "test": "test"}, sni, 0),
    # ELSA's data sets (paper 002); SuperGLUE's validation splits test (their test labels are hidden)
    HFTask("ag_news", "fancyzhx/ag_news", None, {"train": "train", "test": "test"}, ag_news, 4),
    HFTask("banking77", "PolyAI/banking77", None, {"train": "train", "test": "test"}, banking77, 77),
    HFTask("emotion", "dair-ai/emotion", "split", {"train": "train", "test": "test"}, emotion, 6),
    HFTask("trec", "CogComp/trec", None, {"train": "train", "test": "test"}, trec, 6),
    HFTask("cb", "aps/super_glue", "cb", {"train": "train", "test": "validation"}, cb, 3),
    HFTask("multirc", "aps/super_glue", "multirc", {"train": "train", "test": "validation"}, multirc, 2),
    HFTask("squad", "rajpurkar/squad", None, {"train": "train", "test": "validation"}, squad, 0),
    *(HFTask(f"bbh_{sub}", "lukaemon/bbh", sub, {"train": "test[:60%]", "test": "test[60%:]"}, bbh(sub), 2)
      for sub in BBH_BINARY),
]}


def load_rows(name: str, split: str, hf_dir: str | None = None):
    import datasets

    datasets.disable_progress_bars()   # progress of a local file read is noise on stderr

    task = HF_TASKS[name]
    if hf_dir:
        files = local_files(name, split, hf_dir)
        for f in files:
            check_json_rows(f)
        return datasets.load_dataset("json", data_files=[str(f) for f in files], split="train")
    try:
        return datasets.load_dataset(task.hub_id, task.hub_config, split=task.splits[split])
    except Exception as e:  # no network, no cache, renamed data set: one clear line instead of a traceback
        from fedlab.validation import ConfigError

        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"data.source: could not load {task.hub_id}"
                          f"{'/' + task.hub_config if task.hub_config else ''} ({first[:200]}); offline, set "
                          f"data.hf_dir to a folder with {name}/train.jsonl and {name}/test.jsonl") from None


def local_files(name: str, split: str, hf_dir: str) -> list[Path]:
    from fedlab.files import input_path

    folder = input_path(hf_dir) / name
    files = sorted(folder.glob(f"{split}.json*"))
    if not files:
        raise FileNotFoundError(f"data.hf_dir: no {split}.json or {split}.jsonl under {folder}")
    return files


def check_json_rows(path: Path) -> None:
    """One line naming the file and line when a .jsonl line is not a JSON object (a .json file: when the
    file is not JSON), instead of the `datasets` reader's traceback."""
    from fedlab.files import read_text
    from fedlab.validation import ConfigError

    text = read_text(path, "data.hf_dir", "rows of JSON objects (.jsonl) or a JSON list (.json)")
    if not text.strip():
        raise ConfigError(f"data.hf_dir: {path} holds no rows; expected one JSON object per line")
    if path.suffix != ".jsonl":
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"data.hf_dir: {path}:{e.lineno}: not valid JSON ({e.msg})") from None
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"data.hf_dir: {path}:{lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ConfigError(f"data.hf_dir: {path}:{lineno}: expected one JSON object per line, got "
                              f"{type(row).__name__}")


def _raw_rows(name: str, split: str, hf_dir: str):
    """(file, line, row) of local rows as written (the `datasets` reader fills absent fields with None)."""
    for f in local_files(name, split, hf_dir):
        if f.suffix == ".jsonl":
            for lineno, line in enumerate(f.read_text().splitlines(), 1):
                if line.strip():
                    yield f"{f}", f"row {lineno}", json.loads(line)
        else:
            data = json.loads(f.read_text())
            for i, row in enumerate(data if isinstance(data, list) else data.get("data", [])):
                yield f"{f}", f"row {i + 1}", row


def _bad_row(name: str, split: str, hf_dir: str | None, rows, error: Exception) -> str:
    """Where the first row the adapter refuses is, and why (the error path only: rows in file order)."""
    adapt = HF_TASKS[name].adapt
    found = (_raw_rows(name, split, hf_dir) if hf_dir
             else ((f"data.source: hf:{name} ({split})", f"row {i + 1}", dict(r)) for i, r in enumerate(rows)))
    for where, row_name, r in found:
        try:
            adapt(r)
        except KeyError as e:
            return f"{where}: {row_name} lacks the field {e.args[0]!r} that {name} needs"
        except (TypeError, ValueError, IndexError, AttributeError) as e:
            return f"{where}: {row_name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    return f"data.source: hf:{name} ({split}): {error}"


def hf_examples(name: str, split: str, n: int | None = None, hf_dir: str | None = None, seed: int = 0):
    rows = load_rows(name, split, hf_dir)
    picked = rows.shuffle(seed=seed).select(range(n)) if n is not None and n < len(rows) else rows
    try:
        return [HF_TASKS[name].adapt(dict(r)) for r in picked]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        from fedlab.validation import ConfigError

        raise ConfigError(_bad_row(name, split, hf_dir, rows, e)) from None
