"""Floe's fusion gate: trained on public answer tokens balanced over the tasks, it
must beat every fixed w on held-out positions where the better model differs by task; the held-out check and
the per-task mean w are what the run logs."""
import lightning as L
import torch

from fedlab.methods.floe.fusion import FusionGate, fused_nll, gate_examples, held_out_check, split_held_out


def _synthetic(n_per_task=400, vocab=12, seed=0):
    """Task "a": the SLM puts 0.8 on the right token, the LLM is uniform; task "b": the other way round. The two
    tasks are told apart by which side is peaked, so a gate on [P_SLM; P_LLM] can learn w per position."""
    g = torch.Generator().manual_seed(seed)
    ps, pl, ys, tasks = [], [], [], []
    for task in ("a", "b"):
        for _ in range(n_per_task):
            y = int(torch.randint(vocab, (1,), generator=g))
            sharp = torch.full((vocab,), 0.2 / (vocab - 1))
            sharp[y] = 0.8
            flat = torch.full((vocab,), 1.0 / vocab)
            ps.append(sharp if task == "a" else flat)
            pl.append(flat if task == "a" else sharp)
            ys.append(y)
            tasks.append(task)
    perm = torch.randperm(len(ys), generator=g)
    return (torch.stack(ps)[perm], torch.stack(pl)[perm], torch.tensor(ys)[perm], [tasks[i] for i in perm.tolist()])


def test_the_trained_gate_beats_every_fixed_w_on_held_out_positions():
    ps, pl, ys, tasks = _synthetic()
    train, held = split_held_out(tasks, list(range(len(ys))))      # one position per synthetic example
    L.seed_everything(0)
    gate = FusionGate(ps.shape[-1], "full", lr=1e-2)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ps[train], pl[train], ys[train]),
                                         batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    L.Trainer(max_epochs=15, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, accelerator="cpu").fit(gate, loader)
    gate.eval()
    check = held_out_check(gate, ps[held], pl[held], ys[held], [tasks[i] for i in held.tolist()])
    fixed = min(fused_nll(w, ps[held], pl[held], ys[held]) for w in (0.0, 0.25, 0.5, 0.75, 1.0))
    assert check["fused/heldout_nll"] < fixed - 0.1
    assert check["fused/gate_check"] == 1.0
    assert check["fused/gate_w/a"] > 0.75 and check["fused/gate_w/b"] < 0.25     # w follows the better side


def test_an_untrained_gate_fails_the_check_where_one_side_is_always_better():
    ps, pl, ys, tasks = _synthetic()
    pl = torch.full_like(pl, 1.0 / pl.shape[-1])         # the LLM is uniform everywhere: w = 1 is best
    gate = FusionGate(ps.shape[-1], "full")
    torch.nn.init.zeros_(gate.mlp[-1].weight)
    torch.nn.init.zeros_(gate.mlp[-1].bias)              # w = 0.5 everywhere
    check = held_out_check(gate, ps, pl, ys, tasks)
    assert check["fused/gate_check"] == 0.0 and check["fused/heldout_nll"] > check["fused/heldout_nll_slm"]


class _Tok:
    def __init__(self):
        self.vocab = {str(i): i for i in range(10)}

    def get_vocab(self):
        return self.vocab


def _read_gate_examples(monkeypatch, mc_examples: int, limit: int = 100):
    """gate_examples on 20 generation answers of 30 tokens and `mc_examples` one-token answers (stub models):
    (next tokens, task per position, train indices, held-out indices, example per position)."""
    from types import SimpleNamespace

    from fedlab.methods.floe import fusion

    monkeypatch.setattr("fedlab.data.collate.continuation_ids",
                        lambda tok, prompt, target: ([1, 2], [3] * len(target.split())))
    monkeypatch.setattr(fusion, "next_probs_ids", lambda model, ids, max_length: torch.full((10,), 0.1))
    long = [SimpleNamespace(task="gen", prompt=f"g{i}", target=" ".join(["w"] * 30)) for i in range(20)]
    short = [SimpleNamespace(task="mc", prompt=f"m{i}", target="x") for i in range(mc_examples)]
    tok = _Tok()
    _, _, ys, tasks, owners = gate_examples(lambda p: (None, tok), (None, tok), torch.arange(10), long + short, 64,
                                            limit=limit)
    train, held = split_held_out(tasks, owners)
    return ys, tasks, train, held, owners


def test_gate_trains_on_limit_positions_balanced_over_tasks(monkeypatch):
    """`limit` counts the positions the gate trains on (default 2,048): a task with long answers
    (generation) cannot crowd out one with one-token answers — each gets an equal share — and every fifth
    example of a task is read on top, held out whole."""
    ys, tasks, train, held, owners = _read_gate_examples(monkeypatch, 200)
    assert len(train) == 100                                   # exactly `limit` trained positions
    train_tasks = [tasks[i] for i in train.tolist()]
    assert train_tasks.count("gen") == 50 and train_tasks.count("mc") == 50
    # held out by example, per task: no answer on both sides
    assert not {owners[i] for i in train.tolist()} & {owners[i] for i in held.tolist()}
    held_tasks = [tasks[i] for i in held.tolist()]
    # mc: its 50 trained answers are examples 0..61 less the 12 held (4, 9, …, 59); gen: 50 positions come from
    # examples 0 and 1 (30 + 20), before its first held example (4), so none is read
    assert held_tasks.count("mc") == 12 and held_tasks.count("gen") == 0
    assert len(ys) == 112


def test_a_task_that_runs_out_leaves_its_share_to_the_others(monkeypatch):
    """Ten one-token answers give the mc task 8 trained positions (examples 4 and 9 held out); the generation task
    takes the rest of `limit`, so the gate still trains on `limit` positions."""
    _, tasks, train, held, _ = _read_gate_examples(monkeypatch, 10)
    train_tasks = [tasks[i] for i in train.tolist()]
    assert train_tasks.count("mc") == 8 and train_tasks.count("gen") == 92 and len(train) == 100
    held_tasks = [tasks[i] for i in held.tolist()]
    # mc: example 4 (example 9 comes after its last trained one, 8, and is not read); gen: 92 positions from
    # examples 0–3, before its first held example
    assert held_tasks.count("mc") == 1 and held_tasks.count("gen") == 0


def test_water_fill_shares_equally_and_passes_on_what_a_task_cannot_use():
    from fedlab.methods.floe.fusion import water_fill

    assert water_fill({"a": 3, "b": 100, "c": 100}, 30) == {"a": 3, "b": 14, "c": 13}
    assert water_fill({"a": 50, "b": 50}, 30) == {"a": 15, "b": 15}
    assert water_fill({"a": 5, "b": 6}, 30) == {"a": 5, "b": 6}             # not enough: everything


def test_the_held_out_split_keeps_every_tasks_share_when_tasks_come_in_turn():
    """Five tasks of one-token answers read in turn: holding out every fifth position (or every fifth example
    overall) would hold out one task only; per task, each keeps one example in five."""
    tasks = [t for _ in range(5) for t in "abcde"]           # round robin, as gate_examples reads them
    owners = list(range(len(tasks)))                          # one position per example
    train, held = split_held_out(tasks, owners)
    assert sorted(tasks[i] for i in held.tolist()) == list("abcde")
    assert len(train) == 20
