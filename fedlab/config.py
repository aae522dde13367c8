"""Typed, frozen experiment configs: YAML files that override defaults, dotted `key=value` overrides,
validation that names the key, the bad value and what is allowed — before any model loads."""
from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

import yaml

from fedlab.files import anchored
from fedlab.validation import ConfigError, MethodConfig, check, choose, doc  # noqa: F401  (re-exported)


# ----------------------------------------------------------------------------------------------------------
# sections
@dataclass(frozen=True)
class LoraConfig:
    r: int = doc(8, "LoRA rank r of the factors B·A added to each targeted layer")
    alpha: float = doc(16.0, "LoRA α: the update B·A is scaled by α / r")
    dropout: float = doc(0.05, "dropout on the LoRA branch's input")
    target_modules: Optional[list[str]] = doc(
        None, "the layers that get LoRA: null — PEFT's default attention projections per model type (q_proj/v_proj "
              "for LLaMA, c_attn for GPT-2, …); [all-linear] — every linear layer of the blocks, whatever the "
              "architecture; or a list of module names")

    def validate(self, p: str) -> None:
        check(self.r >= 1, f"{p}.r", self.r, "an integer >= 1")
        check(self.alpha > 0, f"{p}.alpha", self.alpha, "a number > 0")
        check(0.0 <= self.dropout < 1.0, f"{p}.dropout", self.dropout, "a number in [0, 1)")


@dataclass(frozen=True)
class ModelConfig:
    name: str = doc("tiny-llama", "the model: a zoo name (`fedlab zoo list`), a Hugging Face model id or a local "
                                  "directory")
    lora: LoraConfig = doc(help="the LoRA adapters trained on the model(s)", factory=LoraConfig)
    max_length: int = doc(96, "maximum tokens of one training or scored example (prompt + answer); longer prompts "
                              "are cut from the left")
    clients: Optional[list[str]] = doc(
        None, "per-client models (one name per client, e.g. four SLM families for FedMKT); null: every client runs "
              "`name`. With it, `name` is the server's model (the LLM) where the method has one")

    def validate(self, p: str) -> None:
        check(self.max_length >= 8, f"{p}.max_length", self.max_length, "an integer >= 8")
        check(self.clients is None or (len(self.clients) >= 1 and all(isinstance(c, str) and c
                                                                      for c in self.clients)),
              f"{p}.clients", self.clients, "null or a non-empty list of model names, one per client")

    def client_model(self, cid: int) -> str:
        return self.clients[cid] if self.clients else self.name


PartitionKind = Literal["iid", "by_task", "dirichlet_label", "dirichlet_label_quantity", "dirichlet_domain",
                        "dirichlet_mix", "quantity"]


@dataclass(frozen=True)
class DataConfig:
    source: str = doc(
        "embedded", "the data: \"embedded\" (the synthetic benchmark) or \"hf:<name>\" (arc_easy, sst2, …, see "
                    "`fedlab data describe`); several Hugging Face tasks in one run: \"hf:<a>+<b>+…\" (each a task, "
                    "as the embedded tasks are)")
    tasks: list[str] = doc(help="the embedded benchmark's tasks in the run (with source \"embedded\")",
                           factory=lambda: ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase",
                                            "entailment", "topic"])
    num_clients: int = doc(8, "number of clients the training data is partitioned among")
    partition: PartitionKind = doc(
        "by_task", "how the training data is split among the clients: iid | by_task (client i holds task i mod T) "
                   "| dirichlet_label (label skew, Dir(alpha) per class) | dirichlet_label_quantity (label skew plus "
                   "quantity skew, client n's share scaled by n + 1) | dirichlet_domain (domain skew, Dir(alpha) per "
                   "domain) | dirichlet_mix (each client's domain mix drawn from Dir(alpha), equal sizes) | quantity "
                   "(client sizes from Dir(alpha))")
    alpha: float = doc(0.5, "Dirichlet concentration α for the skewed partitioners (smaller: more skewed)")
    train_per_task: int = doc(160, "training examples per task, before any public or validation hold-out")
    test_per_task: int = doc(300, "test examples per task (per-task standard error about ±0.03 at accuracy 0.5)")
    public_size: int = doc(256, "with public_source \"instructions\": the size of the public (server) set")
    public_source: Literal["instructions", "holdout"] = doc(
        "instructions", "where the public set comes from: \"instructions\" (public_size instruction/response pairs, "
                        "the Alpaca analogue) or \"holdout\" (FedMKT Appendix D.2: a public_fraction of the task "
                        "training data is held out as the public set, the rest is partitioned among the clients)")
    public_path: Optional[str] = doc(
        None, "with public_source \"instructions\": a JSON / JSON Lines file of Alpaca-shaped rows (instruction, "
              "input, output) from which public_size rows are drawn (seeded) instead of the embedded instruction set",
        input_path=True)
    public_fraction: float = doc(0.2, "with public_source \"holdout\": the fraction of each task's training data "
                                      "held out as the public set")
    evaluate_on: Literal["test", "validation"] = doc(
        "test", "what the runs are scored on: \"test\" (the test sets) or \"validation\" — validation_per_task rows "
                "of each task's training data, held out before partitioning (seeded), stand in for the test sets, "
                "which are not read at all: choose hyperparameters with it, report the chosen ones on the test sets")
    validation_per_task: int = doc(100, "with evaluate_on \"validation\": rows of each task's training data held "
                                        "out as its validation set")
    validation_from: Literal["train", "held"] = doc(
        "train", "with evaluate_on \"validation\": where each task's validation_per_task rows come from — \"train\": "
                 "held out of its training rows (the training data shrinks by as many); \"held\" (embedded tasks): "
                 "fresh rows about the population its test set asks about (the held-out people, or number pairs), "
                 "drawn apart from the test set and never asking what a test item asks, so a task whose test "
                 "asks about people the training rows never name is validated on such people too, and the "
                 "training data stays whole; a task whose test set asks about nearly all of its population (too "
                 "few other prompts) falls back to \"train\" (`fedlab.data.federated.validation_sources` names them)")
    validation_keeps_shares: bool = doc(
        False, "with validation_from \"held\": each task's fresh rows give every answer the share of them its test set "
               "gives it (largest remainders), so a validation score means what a test score does; a task whose "
               "population cannot fill those shares falls back to \"train\" like one with too few prompts. false: "
               "the fresh rows in the order drawn, whatever their answers — which leaves paraphrase nearly all \"no\" "
               "(its fresh prompts are almost all non-paraphrases), where answering one class scores near 100")
    validation_holdout_keeps_shares: bool = doc(
        False, "with validation_keeps_shares: a task that falls back to \"train\" holds its validation prompts out "
               "of its training rows in its test set's answer shares too (largest remainders; where its training "
               "prompts hold too few of an answer, the rows it leaves go to the others by their shares), so its validation score means what "
               "a test score does. false: the held-out prompts as drawn, whatever their answers, which leaves a task "
               "whose training population shares its answers otherwise than its test population (recall) skewed")
    validation_holdout_per_task: Optional[int] = doc(
        None, "with validation_from \"held\": the rows held out of the training data as the validation set of a "
              "task that falls back to \"train\", so that the held tasks can be validated on as many rows as a test "
              "set while the fallback takes few training rows; null: validation_per_task")
    validation_refills_train: bool = doc(
        False, "with evaluate_on \"validation\" (embedded tasks): each task whose validation rows are held out of "
               "its training rows trains on as many rows as a test-scored run does — the rows that asked a held-out "
               "prompt are replaced by further rows of the same training population (never one that asks a held-out "
               "prompt) — so a budget chosen on validation is chosen at the table's training size; false: the "
               "training data shrinks by the rows held out")
    world_seed: int = doc(0, "seed of the synthetic world (the embedded benchmark's facts and items); separate from "
                             "the run seed")
    test_draw: Literal["fixed", "per_seed"] = doc(
        "fixed", "the embedded benchmark's test items: \"fixed\" (the same test_per_task items in every run) or "
                 "\"per_seed\" (drawn anew from the held-out people for each run seed, so an interval over seeds "
                 "covers the test sample too; used for Floe's tables)")
    choices_as_text: bool = doc(
        False, "true: the multiple-choice training (and held-out public) samples are trained as generated answers — "
               "the choice's text followed by EOS, as a generative answer is — so a model scored on its generated "
               "answer (eval.mc_generate) has learnt where the answer ends; false: the choice's text alone (scored "
               "by likelihood)")
    hf_dir: Optional[str] = doc(None, "local folder of JSON rows for hf:<name> (offline); null: the Hugging Face Hub",
                                input_path=True)
    client_test_fraction: float = doc(
        0.0, "0: every client is scored on the shared per-task test sets; > 0: each client's test set is this "
             "fraction of its own partition, held out before training (Co-PLMs: 80 % train / 20 % test per device)")
    client_test_per_task: int = doc(
        0, "> 0: each client is scored on up to this many items per task of its own, drawn from the shared test "
           "set with its training domain mix (a domain-matched test set, larger than a held-out fraction can be)")
    mislabeled_clients: list[int] = doc(
        help="clients whose training labels are partly wrong (ELSA's mislabeled clients, see the ELSA README): in "
             "each, mislabel_fraction of its multiple-choice samples gets another choice as its answer (seeded)",
        factory=list)
    mislabel_fraction: float = doc(0.5, "fraction of a mislabeled client's multiple-choice samples given another "
                                        "choice as their answer")
    mislabeled_count: int = doc(
        0, "instead of naming them: this many mislabeled clients drawn (seeded) among the clients that hold at "
           "least two classes, each with at least mislabel_min_share of the client's samples (see the ELSA README)")
    mislabel_min_share: float = doc(0.1, "with mislabeled_count: the smallest share of a client's samples its "
                                         "second class must have for the client to be drawn")
    min_client_samples: int = doc(
        1, "every client holds at least this many training samples (topped up from the largest clients after the "
           "partition; ELSA: two batches, so no client solves its local problem with one or two examples)")

    @property
    def holdout_per_task(self) -> int:
        """The rows a task validated on its training data holds out of them (`validation_from` \"train\", or a
        \"held\" task's fallback)."""
        if self.validation_from == "held" and self.validation_holdout_per_task is not None:
            return self.validation_holdout_per_task
        return self.validation_per_task

    def public_count(self) -> int:
        """Size of the public (server) set: public_size instruction pairs, or with `holdout` the share of each
        task's training data held out (per task)."""
        if self.public_source == "instructions":
            return self.public_size
        return round(self.public_fraction * self.train_per_task)

    def hf_tasks(self) -> list[str]:
        """The Hugging Face task names of source "hf:<a>+<b>+…" (empty for the embedded benchmark)."""
        return [n for n in self.source[3:].split("+")] if self.source.startswith("hf:") else []

    def validate(self, p: str) -> None:
        from fedlab.data import registry as dreg
        check(self.num_clients >= 1, f"{p}.num_clients", self.num_clients, "an integer >= 1")
        check(self.alpha > 0, f"{p}.alpha", self.alpha, "a number > 0")
        check(self.train_per_task >= 1, f"{p}.train_per_task", self.train_per_task, "an integer >= 1")
        check(self.test_per_task >= 1, f"{p}.test_per_task", self.test_per_task, "an integer >= 1")
        check(self.public_size >= 0, f"{p}.public_size", self.public_size, "an integer >= 0")
        check(0 < self.public_fraction < 1, f"{p}.public_fraction", self.public_fraction, "a number in (0, 1)")
        check(0 <= self.client_test_fraction < 1, f"{p}.client_test_fraction", self.client_test_fraction,
              "a number in [0, 1)")
        check(all(0 <= c < self.num_clients for c in self.mislabeled_clients), f"{p}.mislabeled_clients",
              self.mislabeled_clients, f"client ids in 0..{self.num_clients - 1}")
        check(0 < self.mislabel_fraction <= 1, f"{p}.mislabel_fraction", self.mislabel_fraction, "a fraction in (0, 1]")
        check(0 <= self.mislabeled_count <= self.num_clients, f"{p}.mislabeled_count", self.mislabeled_count,
              f"an integer in 0..{self.num_clients} (data.num_clients)")
        check(not (self.mislabeled_count and self.mislabeled_clients), f"{p}.mislabeled_count",
              self.mislabeled_count, "0 when data.mislabeled_clients names the clients (one or the other)")
        check(0 < self.mislabel_min_share <= 0.5, f"{p}.mislabel_min_share", self.mislabel_min_share,
              "a fraction in (0, 0.5]")
        check(self.min_client_samples >= 1, f"{p}.min_client_samples", self.min_client_samples, "an integer >= 1")
        check(self.public_path is None or self.public_source == "instructions", f"{p}.public_path", self.public_path,
              "null with data.public_source=holdout (the public set is then held out of the task data)")
        check(self.validation_per_task >= 1, f"{p}.validation_per_task", self.validation_per_task, "an integer >= 1")
        check(self.validation_from == "train" or self.source == "embedded", f"{p}.validation_from",
              self.validation_from, "\"train\" with data.source other than embedded (only the embedded tasks have a "
              "held-out population to draw from)")
        own = self.validation_from == "held" and self.validation_holdout_per_task is not None
        key = "validation_holdout_per_task" if own else "validation_per_task"
        check(self.evaluate_on == "test" or self.holdout_per_task < self.train_per_task, f"{p}.{key}",
              self.holdout_per_task,
              f"fewer than data.train_per_task ({self.train_per_task}) rows, so that some are left to train on"
              + ("" if own or self.validation_from == "train" else
                 " (with validation_from \"held\", data.validation_holdout_per_task sets the hold-out apart)"))
        check(not self.validation_refills_train or self.source == "embedded", f"{p}.validation_refills_train",
              self.validation_refills_train, "false with data.source other than embedded (only the embedded tasks "
              "can draw further rows of a training population)")
        check(not self.validation_holdout_keeps_shares or self.validation_keeps_shares,
              f"{p}.validation_holdout_keeps_shares", self.validation_holdout_keeps_shares,
              "false without data.validation_keeps_shares (the held-out rows then keep no shares either)")
        check(self.validation_holdout_per_task is None or self.validation_holdout_per_task >= 1,
              f"{p}.validation_holdout_per_task", self.validation_holdout_per_task, "null or an integer >= 1")
        check(self.client_test_per_task >= 0, f"{p}.client_test_per_task", self.client_test_per_task, "an integer >= 0")
        check(not (self.client_test_per_task and self.client_test_fraction), f"{p}.client_test_per_task",
              self.client_test_per_task, "0 when data.client_test_fraction is set (one kind of per-client test set)")
        if self.source == "embedded":
            check(len(self.tasks) >= 1, f"{p}.tasks", self.tasks, "a non-empty list of tasks")
            for t in self.tasks:
                choose(t, dreg.EMBEDDED_TASKS, f"{p}.tasks")
        elif self.source.startswith("hf:"):
            names = self.hf_tasks()
            check(len(set(names)) == len(names), f"{p}.source", self.source, "'hf:<a>+<b>' without repeats")
            for name in names:
                choose(name, dreg.HF_TASKS, f"{p}.source", prefix="hf:")
        else:
            raise ConfigError(f"{p}.source: {self.source!r} is not allowed; allowed: 'embedded' or "
                              f"'hf:<name>' (or 'hf:<a>+<b>') with names in {sorted(dreg.HF_TASKS)}")
        n_tasks = len(self.tasks) if self.source == "embedded" else len(self.hf_tasks())
        if self.partition == "by_task":
            check(self.num_clients >= n_tasks, f"{p}.num_clients", self.num_clients,
                  f"at least one client per task with partition=by_task ({n_tasks} tasks)")
        per_task = self.train_per_task
        if self.public_source == "holdout":   # what is left for the clients after the public share
            per_task = self.train_per_task - round(self.public_fraction * self.train_per_task)
            check(per_task >= 1, f"{p}.public_fraction", self.public_fraction,
                  f"a fraction that leaves training data for the clients (train_per_task={self.train_per_task})")
        if self.partition == "by_task":
            most = per_task * n_tasks
            check(-(-self.num_clients // n_tasks) <= per_task, f"{p}.num_clients", self.num_clients,
                  f"at most {most} clients: every client needs at least one training sample of its task")
        else:
            most = per_task * n_tasks
            check(most >= self.num_clients, f"{p}.num_clients", self.num_clients,
                  f"at most {most} clients: every client needs at least one training sample")
        check(self.min_client_samples * self.num_clients < per_task * n_tasks, f"{p}.min_client_samples",
              self.min_client_samples, f"fewer than {per_task * n_tasks} / {self.num_clients} (the training "
              "samples per client), so that the partition can give every client that many")


@dataclass(frozen=True)
class FederationConfig:
    rounds: int = doc(5, "federated rounds (0: evaluate the initial models only)")
    local_epochs: int = doc(1, "epochs over its own data each sampled client trains per round")
    local_steps: Optional[int] = doc(None, "optimiser steps per local fit; overrides local_epochs when set")
    batch_size: int = doc(16, "training batch size (clients, and the server where it trains)")
    lr: float = doc(2e-3, "learning rate of the AdamW optimiser (and the default of a method's own learning rates)")
    weight_decay: float = doc(0.0, "AdamW weight decay")
    betas: list[float] = doc(help="AdamW (β1, β2)", factory=lambda: [0.9, 0.999])
    warmup_ratio: float = doc(0.0, "linear warm-up over this fraction of each local fit's steps")
    client_fraction: float = doc(1.0, "fraction of clients sampled per round (drawn by seed and round)")
    min_clients: int = doc(1, "a round fails when fewer sampled clients than this (or than were asked, if fewer) "
                              "give a usable answer")
    client_timeout: Optional[float] = doc(None, "seconds a client's fit may take before it counts as failed; null: "
                                                "no limit")
    comm_budget_mb: Optional[float] = doc(
        None, "communication budget of the run in MB (10^6 bytes, up + down over every client): the run ends cleanly "
              "before a round that would take it past the budget, estimated by the largest round so far (the first "
              "round always runs); null: no budget (fedlab/runtime/cost.py)")

    def validate(self, p: str) -> None:
        check(self.rounds >= 0, f"{p}.rounds", self.rounds, "an integer >= 0")
        check(self.local_epochs >= 1, f"{p}.local_epochs", self.local_epochs, "an integer >= 1")
        check(self.local_steps is None or self.local_steps >= 1, f"{p}.local_steps", self.local_steps,
              "null or an integer >= 1")
        check(self.batch_size >= 1, f"{p}.batch_size", self.batch_size, "an integer >= 1")
        check(self.lr > 0, f"{p}.lr", self.lr, "a number > 0")
        check(0 < self.client_fraction <= 1, f"{p}.client_fraction", self.client_fraction,
              "a number in (0, 1]")
        check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), f"{p}.betas", self.betas,
              "two numbers in [0, 1)")
        check(0 <= self.warmup_ratio < 1, f"{p}.warmup_ratio", self.warmup_ratio, "a number in [0, 1)")
        check(self.min_clients >= 1, f"{p}.min_clients", self.min_clients, "an integer >= 1")
        check(self.comm_budget_mb is None or self.comm_budget_mb > 0, f"{p}.comm_budget_mb", self.comm_budget_mb,
              "null or a number > 0")
        check(self.client_timeout is None or self.client_timeout > 0, f"{p}.client_timeout",
              self.client_timeout, "null or a number > 0")


@dataclass(frozen=True)
class BackendConfig:
    name: str = doc("inprocess", "where clients run: inprocess (one after another in the driver) | ray (Ray "
                                 "actors) | a backend added with fedlab.runtime.capabilities.register_backend")
    num_workers: int = doc(2, "Ray actors; each hosts several clients when they outnumber it")
    cpus_per_worker: float = doc(1.0, "CPUs Ray reserves for each worker")
    gpus_per_worker: float = doc(0.0, "GPUs Ray reserves for each worker; fractional GPUs pack several workers on "
                                      "one device")
    num_cpus: Optional[int] = doc(None, "CPUs of a local Ray start; null: what the machine has")
    address: Optional[str] = doc(None, "Ray cluster address; \"auto\" joins a running cluster; null: start Ray "
                                       "locally")
    device: Literal["auto", "cpu", "cuda"] = doc("auto", "torch device: auto (CUDA when there is one) | cpu | cuda")
    threads: int = doc(1, "torch threads per client (same on both backends ⇒ same numbers)")
    server_devices: int = doc(
        1, "the server's training steps data-parallel over this many devices (GPUs, or processes on the CPU), "
           "each with batch_size / server_devices of every batch (fedlab/objectives/server_fit.py)")

    def validate(self, p: str) -> None:
        from fedlab.runtime.capabilities import BACKENDS

        choose(self.name, BACKENDS, f"{p}.name")
        check(self.num_workers >= 1, f"{p}.num_workers", self.num_workers, "an integer >= 1")
        check(self.cpus_per_worker > 0, f"{p}.cpus_per_worker", self.cpus_per_worker, "a number > 0")
        check(self.gpus_per_worker >= 0, f"{p}.gpus_per_worker", self.gpus_per_worker, "a number >= 0")
        check(self.threads >= 1, f"{p}.threads", self.threads, "an integer >= 1")
        check(self.server_devices >= 1, f"{p}.server_devices", self.server_devices, "an integer >= 1")


@dataclass(frozen=True)
class EvalConfig:
    every: int = doc(1, "evaluate every n rounds (and always after the last)")
    length_normalized: bool = doc(False, "acc_norm: a choice's log-likelihood divided by its characters")
    max_per_task: Optional[int] = doc(None, "score at most this many test items per task; null: all of them")
    batch_size: int = doc(64, "batch size of the scoring forward passes")
    scorer: Literal["shared", "pairs"] = doc(
        "shared", "shared: each prompt runs once and every choice is scored on its key/value cache; pairs: one "
                  "forward pass per (prompt, choice) — the same sums, several times the compute (kept as the "
                  "reference)")
    cache: bool = doc(
        True, "scores of a model already scored on the same questions and settings come from $FEDLAB_HOME/eval_cache "
              "(fedlab/eval/cache.py: keyed by the model's bytes, the questions, the scorer, threads and versions)")
    mc_generate: bool = doc(
        False, "multiple-choice tasks also answered by generation and scored with Rouge-L and exact match against "
               "the right choice's text, beside their accuracy (Co-PLMs' Table 1 scores every task so)")
    overlap: bool = doc(
        False, "true: round t's evaluation runs in a second process while round t + 1 trains "
               "(fedlab/runtime/overlap.py: the same scores, the last round in line; for methods that score what "
               "their instructions carry, in-process)")

    target: Optional[float] = doc(
        None, "cost to a target: the rounds, bytes and seconds until target_metric first reaches this value are "
              "logged (cost/…) and shown by fedlab report; with target_reference, a fraction of that run's final "
              "value; null: none (fedlab/runtime/cost.py)")
    target_metric: Optional[str] = doc(None, "the metric eval.target applies to; null: the method's headline metric "
                                             "(acc/mean for most)")
    target_reference: Optional[str] = doc(
        None, "a finished run (its folder, or an MLflow run id), e.g. the centralized control: eval.target is then a "
              "fraction of its final target_metric")

    def validate(self, p: str) -> None:
        check(self.every >= 1, f"{p}.every", self.every, "an integer >= 1")
        check(self.target is None or self.target > 0, f"{p}.target", self.target, "null or a number > 0")
        check(self.target_reference is None or self.target is not None, f"{p}.target_reference",
              self.target_reference, "null unless eval.target is set (the fraction of the reference's value)")
        check(self.batch_size >= 1, f"{p}.batch_size", self.batch_size, "an integer >= 1")


@dataclass(frozen=True)
class TrackingConfig:
    enabled: bool = doc(True, "log the run to MLflow (params, per-round metrics, artifacts)")
    uri: str = doc("sqlite:///mlruns/mlflow.db", "MLflow tracking store URI")
    artifact_root: str = doc("mlruns/artifacts", "folder of the MLflow artifacts (one subfolder per experiment)")
    experiment: str = doc("fedlab", "MLflow experiment the run is logged under")
    run_name: Optional[str] = doc(None, "MLflow run name; null: <method>-<model>-s<seed>")


FAULT_KINDS = ["raise", "hang", "die", "nan", "wrong_keys", "wrong_shape", "stale_round", "duplicate", "sign_flip"]


@dataclass(frozen=True)
class FaultConfig:
    """One injected fault (for testing a federation's resilience): what `client` does in `round` (null: every
    round). raise: its fit raises; hang: it sleeps `seconds` first; die: its worker process exits (Ray only);
    nan / wrong_keys / wrong_shape / stale_round / duplicate: its upload is corrupted that way; sign_flip: it
    sends −scale × its honest update (a model-poisoning attacker)."""
    kind: str = doc("raise", "the fault: raise | hang | die | nan | wrong_keys | wrong_shape | stale_round | "
                             "duplicate | sign_flip")
    client: int = doc(0, "the client id that misbehaves")
    round: Optional[int] = doc(None, "the round it misbehaves in; null: every round")
    seconds: float = doc(60.0, "hang: seconds the client sleeps before its fit")
    scale: float = doc(10.0, "sign_flip: the client sends −scale × its honest update")

    def validate(self, p: str) -> None:
        choose(self.kind, FAULT_KINDS, f"{p}.kind")
        check(self.client >= 0, f"{p}.client", self.client, "a client id >= 0")
        check(self.round is None or self.round >= 1, f"{p}.round", self.round, "null (every round) or a round >= 1")
        check(self.seconds > 0, f"{p}.seconds", self.seconds, "a number > 0")


@dataclass(frozen=True)
class ExperimentConfig:
    model: ModelConfig = doc(help="the model(s) and their LoRA", factory=ModelConfig)
    data: DataConfig = doc(help="the benchmark, its partition among the clients and the public set",
                           factory=DataConfig)
    federation: FederationConfig = doc(help="rounds, client sampling and local training", factory=FederationConfig)
    backend: BackendConfig = doc(help="where clients run (in-process or Ray) and on which devices",
                                 factory=BackendConfig)
    method: MethodConfig = doc(help="the federated method; its fields depend on method.name", factory=MethodConfig)
    eval: EvalConfig = doc(help="how and when the models are scored", factory=EvalConfig)
    tracking: TrackingConfig = doc(help="MLflow tracking", factory=TrackingConfig)
    faults: list[FaultConfig] = doc(help="injected faults (tests, resilience drills)", factory=list)
    plugins: list[str] = doc(
        help="modules or .py files imported before the config is built: they register methods and transforms of "
             "their own (a researcher's method outside fedlab); a relative file path in a YAML is relative to it",
        factory=list)
    seed: int = doc(0, "the run seed (data partition, client sampling, LoRA initialisation, …)")
    output_dir: str = doc("runs", "folder of the run folders (checkpoints, records)")
    resume: bool = doc(False, "continue a killed run from its last checkpoint")
    numerics: str = doc(
        "pinned", "CPU numerics (fedlab/numerics.py): \"pinned\" = the AVX2 kernels on every x86-64 CPU (the same "
                  "bits on every machine), \"native\" = the CPU's fastest kernels; set before torch loads (`fedlab "
                  "run` restarts itself with FEDLAB_NUMERICS when this differs from the process's mode)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def identity(self) -> dict:
        """What makes this run this run: the config with every field left at its default omitted (a section's
        `name` always kept), so that a field added to fedlab with a default that keeps the old behaviour does
        not change the identity of runs made before it (`fedlab.runtime.federation.run_key`)."""
        return non_default(self)


def _default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def non_default(obj):
    """A dataclass as a dict without the fields equal to their defaults (recursively; `name` always kept);
    other values as `dataclasses.asdict` gives them."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return [non_default(x) for x in obj] if isinstance(obj, (list, tuple)) else obj
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        d = _default_of(f)
        if f.name != "name" and d is not dataclasses.MISSING and _same(v, d):
            continue
        out[f.name] = non_default(v)
    return out


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# ----------------------------------------------------------------------------------------------------------
# typed building from mappings
def _unwrap_optional(tp):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


SCIENTIFIC = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def _coerce(value: Any, tp, key: str):
    tp, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{key}: null is not allowed; expected a value of type {getattr(tp, '__name__', tp)}")
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            choose(str(value), [str(c) for c in choices], key)
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: {value!r} is not allowed; expected a mapping of {tp.__name__} fields")
        return build_dataclass(tp, value, key)
    if origin in (list, tuple):
        (inner,) = typing.get_args(tp)[:1] or (Any,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: {value!r} is not allowed; expected a list")
        items = [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: {value!r} is not allowed; expected a mapping")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: {value!r} is not allowed; expected true or false")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{key}: {value!r} is not allowed; expected an integer")
        return value
    if tp is float:
        if isinstance(value, str) and SCIENTIFIC.fullmatch(value.strip()):
            return float(value)        # 1e-3: YAML 1.1 reads a float without a dot as a string
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: {value!r} is not allowed; expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: {value!r} is not allowed; expected a string")
        return value
    return value


def build_dataclass(cls, data: dict, prefix: str = ""):
    """Build a (frozen) dataclass from a mapping, coercing types and rejecting unknown keys."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {_join(prefix, close[0])!r}?)" if close else ""
            raise ConfigError(f"{_join(prefix, key)}: unknown key{hint}; allowed keys: {', '.join(names)}")
    kwargs = {k: _coerce(v, hints[k], _join(prefix, k)) for k, v in data.items()}
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate(prefix or cls.__name__)
    return obj


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


# ----------------------------------------------------------------------------------------------------------
# loading
def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def apply_override(tree: dict, item: str) -> dict:
    """Apply one `a.b.c=value` override (value parsed as YAML) to a nested dict."""
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected key=value (for example federation.rounds=3)")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {item!r}: empty key")
    value = _override_value(raw)
    node = tree
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return tree


def _override_value(raw: str):
    """An override's value as YAML reads it; text YAML cannot parse stays the text."""
    try:
        return yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        return raw


def input_path_keys() -> set[str]:
    """The dotted keys whose values are input files or folders (fields with metadata `input_path`): in a YAML
    relative to its folder, on the command line to the working directory (`fedlab.files`)."""
    from fedlab import registry

    keys = {f"data.{f.name}" for f in dataclasses.fields(DataConfig) if f.metadata.get("input_path")}
    for name in registry.method_names():
        keys |= {f"method.{f.name}" for f in dataclasses.fields(registry.get(name).config_cls)
                 if f.metadata.get("input_path")}
    return keys


def overrides_relative_to(overrides: list[str] | tuple[str, ...], base: Path) -> list[str]:
    """`overrides` whose input paths are written relative to the folder `base` (a table row's are relative to the
    repository root), with those paths made absolute: `load_config` reads a relative path on the command line
    against the working directory, so a row resolves to the same config from every working directory."""
    keys = input_path_keys()
    out = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if sep and key.strip() in keys:
            value = _override_value(raw)
            if isinstance(value, str) and value.strip() and not Path(value).expanduser().is_absolute():
                item = f"{key}={json.dumps(str(base / value))}"
        out.append(item)
    return out


def _anchor_paths(tree: dict, base: Path, keys: set[str]) -> None:
    """Rewrite, in place, the input paths of `tree` written relative to `base` in their stored form."""
    for key in keys:
        section, _, name = key.partition(".")
        node = tree.get(section)
        if isinstance(node, dict) and name in node:
            node[name] = anchored(node[name], base)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping (the last would silently win)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:                   # an unhashable key: YAML's own error says so below
                continue
            if first != key_node.start_mark.line + 1:
                raise ConfigError(f"config: {self.name}: the key {key!r} is written twice (lines {first} and "
                                  f"{key_node.start_mark.line + 1}); keep one")
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path):
    """A YAML file's content, or one ConfigError naming the file: not a file, not UTF-8 text, not YAML, a key
    written twice."""
    if path.is_dir():
        raise ConfigError(f"config: {path} is a folder; expected a YAML file")
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise ConfigError(f"config: {path} is not UTF-8 text (byte {e.start}); expected a YAML file") from None
    except OSError as e:
        raise ConfigError(f"config: {path} cannot be read ({e.strerror or e})") from None
    loader = _UniqueKeyLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        raise ConfigError(f"config: {path} is not valid YAML: {str(e).splitlines()[0]}") from None
    finally:
        loader.dispose()


def load_yaml_tree(path: str | Path, sources: dict[str, str] | None = None, _chain: tuple[Path, ...] = ()) -> dict:
    """The tree of a YAML file over the files of its `defaults:` chain. With `sources`, also fills it with the
    file (as `shown_path` writes it) that set each dotted leaf key of the tree. A chain that comes back to a file
    is refused, naming the chain."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config: file {str(path)!r} does not exist")
    here_abs = path.resolve()
    if here_abs in _chain:
        loop = " → ".join(shown_path(p) for p in (*_chain[_chain.index(here_abs):], here_abs))
        raise ConfigError(f"config: the defaults chain comes back to a file it started from: {loop}")
    tree = read_yaml(path) or {}
    if not isinstance(tree, dict):
        raise ConfigError(f"config: {path} must hold a mapping at top level")
    plugins = tree.get("plugins")
    if isinstance(plugins, list):
        from fedlab import registry

        tree["plugins"] = [str((path.parent / p).resolve()) if isinstance(p, str) and p.endswith(".py")
                           and not Path(p).is_absolute() else p for p in plugins]
        # a plugin's method may declare input paths of its own: registered before they are anchored below
        registry.load_plugins([p for p in tree["plugins"] if isinstance(p, str)])
    _anchor_paths(tree, path.parent, input_path_keys())
    base = tree.pop("defaults", None)  # `defaults: other.yaml` inherits another file, relative to this one
    if base is not None and not isinstance(base, str):
        raise ConfigError(f"config: {path}: defaults: {base!r} is not allowed; expected the path of one YAML file")
    chain = (*_chain, here_abs)
    if sources is None:
        if base:
            tree = inherit(load_yaml_tree(path.parent / base, None, chain), tree)
        return tree
    own, parent_sources = set(flatten(tree)), {}
    if base:
        tree = inherit(load_yaml_tree(path.parent / base, parent_sources, chain), tree)
    here = shown_path(path)
    sources.update({key: here if key in own else parent_sources.get(key, here) for key in flatten(tree)})
    return tree


def shown_path(path: str | Path) -> str:
    """A config file's path as messages show it: normalised, relative to the working directory when under it."""
    p = os.path.normpath(os.path.abspath(path))
    rel = os.path.relpath(p)
    return p if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def _method_name(tree: dict):
    section = tree.get("method")
    return section.get("name") if isinstance(section, dict) else None


def inherit(parent: dict, child: dict) -> dict:
    """`child` over `parent`, except that a child naming another method starts that method's section from
    the method's own defaults: a parent's FedProxy fields never leak into a TIES or FedOT child."""
    name = _method_name(child)
    if name is not None and name != _method_name(parent):
        parent = {k: v for k, v in parent.items() if k != "method"}
    return deep_merge(parent, child)


def build_config(tree: dict) -> ExperimentConfig:
    """Build and validate an ExperimentConfig from a nested dict; the method section is typed by its name."""
    from fedlab import registry

    tree = dict(tree)
    plugins = tree.get("plugins") or []
    if not isinstance(plugins, list) or not all(isinstance(p, str) and p for p in plugins):
        raise ConfigError(f"plugins: {plugins!r} is not allowed; expected a list of module names or .py paths")
    tree["plugins"] = [str(Path(p).expanduser().resolve()) if p.endswith(".py") else p for p in plugins]
    registry.load_plugins(tree["plugins"])
    method_tree = dict(tree.pop("method", None) or {})
    name = method_tree.get("name", MethodConfig.name)
    if not isinstance(name, str):
        raise ConfigError(f"method.name: {name!r} is not allowed; expected a string")
    choose(name, registry.method_names(), "method.name")
    method_cls = registry.get(name).config_cls
    method = build_dataclass(method_cls, method_tree, "method")
    method.check_fixed("method")
    top_names = [f.name for f in dataclasses.fields(ExperimentConfig)]
    for key in tree:
        if key not in top_names:
            close = difflib.get_close_matches(str(key), top_names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{key}: unknown key{hint}; allowed keys: {', '.join(top_names)}")
    hints = typing.get_type_hints(ExperimentConfig)
    kwargs = {k: _coerce(v, hints[k], k) for k, v in tree.items()}
    cfg = ExperimentConfig(method=method, **kwargs)
    from fedlab.numerics import MODES
    from fedlab.runtime.capabilities import capable

    choose(cfg.numerics, MODES, "numerics")
    out = Path(cfg.output_dir).expanduser()
    check(not out.exists() or out.is_dir(), "output_dir", cfg.output_dir, "a folder (this path is a file)")
    _check_client_models(cfg)
    check(cfg.federation.min_clients <= cfg.data.num_clients, "federation.min_clients", cfg.federation.min_clients,
          f"at most data.num_clients ({cfg.data.num_clients})")
    for i, f in enumerate(cfg.faults):
        check(f.client < cfg.data.num_clients, f"faults[{i}].client", f.client,
              f"a client id below data.num_clients ({cfg.data.num_clients})")
        check(f.kind != "die" or capable(cfg, "worker_processes"), f"faults[{i}].kind", f.kind,
              "a kind other than 'die' with backend.name=inprocess (there is no worker process to lose)")
    if hasattr(method, "check_experiment"):
        method.check_experiment(cfg)
    return cfg


def _check_client_models(cfg) -> None:
    from fedlab import registry

    clients = cfg.model.clients
    if clients is None:
        return
    check(len(clients) == cfg.data.num_clients, "model.clients", clients,
          f"one model name per client (data.num_clients={cfg.data.num_clients})")
    if len(set(clients)) > 1 and not type(cfg.method).heterogeneous_clients:
        ok = sorted(n for n in registry.method_names() if registry.get(n).config_cls.heterogeneous_clients)
        raise ConfigError(f"model.clients: method {cfg.method.name!r} needs one model shared by every client "
                          f"(it exchanges weights); different client models are allowed with: {', '.join(ok)}")


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """The config of a YAML file with dotted `key=value` overrides. An override `method.name=X` naming
    another method than the file's starts the method section from X's defaults (the file's method fields
    belong to its own method); the other `method.*` overrides apply on top, in any order."""
    return _load_config(path, overrides, None)


def load_config_with_sources(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
                             ) -> tuple[ExperimentConfig, dict[str, str]]:
    """`load_config`'s config, and where each value the files and overrides set came from: dotted leaf key →
    the YAML file of the `defaults:` chain that set it (`shown_path`) or "command line". Keys not in the
    mapping keep their defaults."""
    sources: dict[str, str] = {}
    return _load_config(path, overrides, sources), sources


def _load_config(path, overrides, sources: dict[str, str] | None) -> ExperimentConfig:
    tree = load_yaml_tree(path, sources) if path else {}
    names = [item.split("=", 1)[1].strip() for item in overrides if item.split("=", 1)[0].strip() == "method.name"]
    if names and yaml.safe_load(names[-1]) != _method_name(tree):
        tree.pop("method", None)
        if sources is not None:
            _forget(sources, "method")
    keys = input_path_keys()
    for item in overrides:
        apply_override(tree, item)
        # a path on the command line is relative to the working directory
        _anchor_paths(tree, Path.cwd(), keys & {item.split("=", 1)[0].strip()})
        if sources is not None:
            _note_override(sources, tree, item.split("=", 1)[0].strip())
    return build_config(tree)


def _forget(sources: dict[str, str], key: str) -> None:
    """Drop the sources of `key`, of the keys under it and of the keys it is under (all replaced)."""
    for k in [k for k in sources if k == key or k.startswith(key + ".") or key.startswith(k + ".")]:
        del sources[k]


def _note_override(sources: dict[str, str], tree: dict, key: str) -> None:
    """Record that the override of `key` (already applied to `tree`) set it and every leaf under it."""
    _forget(sources, key)
    node = tree
    for part in key.split("."):
        node = node[part]
    if isinstance(node, dict):
        sources.update({f"{key}.{k}": "command line" for k in flatten(node)})
    else:
        sources[key] = "command line"


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def to_yaml(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


def replace(cfg, **changes):
    return dataclasses.replace(cfg, **changes)
