"""Floe's fusion gate (SPEC §4.3, issue 30 item 3): trained on public answer tokens balanced over the tasks, it
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


def test_gate_positions_are_balanced_over_tasks(monkeypatch):
    """A task with long answers (generation) cannot crowd out one with one-token answers: each task gets at most
    ⌈limit / tasks⌉ positions."""
    from types import SimpleNamespace

    from fedlab.methods.floe import fusion

    monkeypatch.setattr("fedlab.data.collate.continuation_ids",
                        lambda tok, prompt, target: ([1, 2], [3] * len(target.split())))
    monkeypatch.setattr(fusion, "next_probs_ids", lambda model, ids, max_length: torch.full((10,), 0.1))
    long = [SimpleNamespace(task="gen", prompt=f"g{i}", target=" ".join(["w"] * 30)) for i in range(20)]
    short = [SimpleNamespace(task="mc", prompt=f"m{i}", target="x") for i in range(200)]
    tok = _Tok()
    ps, pl, ys, tasks, owners = gate_examples(lambda p: (None, tok), (None, tok), torch.arange(10), long + short, 64,
                                              limit=100)
    assert len(ys) == 100 and tasks.count("gen") == 50 and tasks.count("mc") == 50
    # held out by example, per task: no answer on both sides; each task keeps about a fifth of its examples
    train, held = split_held_out(tasks, owners)
    assert not {owners[i] for i in train.tolist()} & {owners[i] for i in held.tolist()}
    held_tasks = [tasks[i] for i in held.tolist()]
    # mc: 10 of its 50 one-token answers; gen: its 50 positions come from 2 long answers, fewer than 5, none held
    assert held_tasks.count("mc") == 10 and held_tasks.count("gen") == 0
    # the old behaviour (no quota) would have given the generation task 30 positions per example in turn
    _, _, ys2, tasks2, _ = gate_examples(lambda p: (None, tok), (None, tok), torch.arange(10), long + short[:10], 64,
                                         limit=100)
    assert tasks2.count("mc") == 10 and tasks2.count("gen") == 50   # mc runs out at 10; gen stays at its quota


def test_the_held_out_split_keeps_every_tasks_share_when_tasks_come_in_turn():
    """Five tasks of one-token answers read in turn: holding out every fifth position (or every fifth example
    overall) would hold out one task only; per task, each keeps one example in five."""
    tasks = [t for _ in range(5) for t in "abcde"]           # round robin, as gate_examples reads them
    owners = list(range(len(tasks)))                          # one position per example
    train, held = split_held_out(tasks, owners)
    assert sorted(tasks[i] for i in held.tolist()) == list("abcde")
    assert len(train) == 20
