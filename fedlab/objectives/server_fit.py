"""The server's training steps on one device or data-parallel over `backend.server_devices`.

At paper scale a server LLM's LoRA step is dominated by activations (LLaMA-2-7B at 16 × 512: 92 GiB peak,
against 33 GiB at 4 × 512; measured on an H200, `benchmarks/results/`), so splitting the batch over W devices
is what lets it fit: each device holds the model and B/W of each batch. The fit then runs under Lightning's
DDP strategy in W spawned processes (GPUs on CUDA, processes with the gloo backend on the CPU); the gradients
are averaged across the devices before every step, and rank 0's trained weights come back into the calling
process.

Same batches as one device: every process draws the same permutation from the same generator the one-device
loader would use (a `RandomSampler` on the same seed, the loader's generator drawn in the same order), cuts it
into the one-device batches of B and hands process r the r-th W-th of each. The averaged gradient of W equal
parts is the one-device gradient of their union when the loss is a mean over equal shares and nothing random
happens in the step: exactly for per-example means with equal part sizes and no dropout. Otherwise close, not
equal: a per-token mean counts each part equally whatever its number of target tokens; a last batch with fewer
than B examples is padded to W equal parts by repeating its own first examples (as torch's DistributedSampler
does), so those examples count twice in that step; and dropout (LoRA's 0.05 by default) draws other masks — rank
0 continues the calling process's random state, every other rank is reseeded from (seed, rank) so that the ranks
do not draw identical masks. `tests/methods/test_server_devices.py` shows two processes agreeing with one on the trained
weights where the conditions hold.

On CUDA, rank r runs on GPU r; the calling process's resident model stays on GPU 0 beside rank 0's copy, so GPU 0
holds more than one device's share (`fedlab plan` counts one). The cluster environment is Lightning's local one
whatever scheduler started the run (a SLURM or torchrun allocation is not used for these fits)."""
from __future__ import annotations

import itertools
import os

import lightning as L
import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler

from fedlab.objectives.modules import fit_metrics
from fedlab.objectives.server_devices import check_server_devices
from fedlab.objectives.training import make_trainer


class RankSlice(Sampler):
    """Process r's share of the one-device batches: the permutation of `RandomSampler(range(n), generator)`,
    cut into batches of `batch_size`, and of each batch the r-th of `world` equal parts (the last, short batch
    padded to a multiple of `world` by repeating its own first indices). The rank is read when iterating, in the
    process that iterates (0 outside a process group)."""

    def __init__(self, n: int, batch_size: int, world: int, generator: torch.Generator):
        self.order = RandomSampler(range(n), generator=generator)
        self.n, self.batch_size, self.world = n, batch_size, world

    def part(self) -> int:
        return self.batch_size // self.world

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full * self.part() + -(-rest // self.world)

    def __iter__(self):
        # indices are pulled from the one-device sampler only as the parts need them, so that its generator is
        # drawn exactly when the one-device loader would draw it (a pass that ends without asking past the last
        # batch leaves RandomSampler's second, empty permutation undrawn, and the next epoch's order depends on it)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        order = iter(self.order)
        while batch := list(itertools.islice(order, self.batch_size)):
            per = -(-len(batch) // self.world)
            batch = (batch * self.world)[:per * self.world] if len(batch) % self.world else batch
            yield from batch[rank * per:(rank + 1) * per]


class _Threads(L.Callback):
    """Sets each spawned process's torch threads to `backend.threads` (Lightning's DDP on the CPU would choose
    cores / processes otherwise, and the numbers depend on the thread count), and closes the process group at the
    end of the fit; ranks other than 0 are reseeded from (seed, rank)."""

    def __init__(self, threads: int, seed: int):
        self.threads, self.seed = threads, seed

    def setup(self, trainer, pl_module, stage) -> None:
        torch.set_num_threads(self.threads)
        if trainer.global_rank > 0:      # its own dropout masks (rank 0 continues the caller's random state)
            from fedlab.seeding import derive_seed, seed_everything

            seed_everything(derive_seed(self.seed, "server-rank", trainer.global_rank))

    def teardown(self, trainer, pl_module, stage) -> None:
        """The fit is over in this process: wait for the others, then close the process group here rather than at
        interpreter exit (a gloo group closed by atexit while a peer was already gone aborted a process now and
        then: "terminate called without an active exception")."""
        if torch.distributed.is_initialized():
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()


def fit_shuffled(cfg, module: L.LightningModule, dataset, collate_fn, *, epochs: int, seed: int, devices: int = 1,
                 manual_optimization: bool = False) -> dict:
    """Fit `module` on `dataset` for `epochs` epochs at federation.batch_size, shuffled by `seed`, on one device or
    data-parallel over `devices` (the server's fits pass `backend.server_devices`; module docstring). Returns the fit's logged
    metrics (`trainer.callback_metrics` as floats; after a spawned fit the module is no longer attached to its
    trainer, so `module.trainer` is not there to ask)."""
    w, b = devices, cfg.federation.batch_size
    generator = torch.Generator().manual_seed(seed)
    if w == 1:
        loader = DataLoader(dataset, batch_size=b, shuffle=True, generator=generator, collate_fn=collate_fn)
        trainer = make_trainer(cfg, max_epochs=epochs, manual_optimization=manual_optimization)
        trainer.fit(module, loader)
        return fit_metrics(module, trainer)
    check_server_devices(cfg)
    loader = DataLoader(dataset, batch_size=b // w, sampler=RankSlice(len(dataset), b, w, generator),
                        generator=generator, collate_fn=collate_fn)
    trainer = make_trainer(cfg, max_epochs=epochs, manual_optimization=manual_optimization, devices=w,
                           callbacks=[_Threads(cfg.backend.threads, seed)])
    # the spawned processes receive the module through shared memory; torch's default file-descriptor passing
    # fails on an empty storage somewhere in Lightning's pickled state ("unable to resize file"), named files
    # in /dev/shm do not
    import torch.multiprocessing as mp

    # Lightning leaves MASTER_PORT in this process's environment after a spawned fit and reuses it for the next;
    # each fit gets a fresh free port instead (a port just released can still be held)
    before, port = mp.get_sharing_strategy(), os.environ.pop("MASTER_PORT", None)
    mp.set_sharing_strategy("file_system")
    try:
        trainer.fit(module, loader)
    finally:
        mp.set_sharing_strategy(before)
        os.environ.pop("MASTER_PORT", None)
        if port is not None:
            os.environ["MASTER_PORT"] = port
    return {k: float(v) for k, v in trainer.callback_metrics.items()}
