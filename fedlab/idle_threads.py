"""How OpenMP's idle threads wait in a fedlab process: spinning when the machine is free, sleeping when it is busy.

torch's CPU kernels run their parallel regions on libgomp's thread team. Between regions a team thread that has
no work either spins for a while (libgomp's default: about 3 ms, `GOMP_SPINCOUNT`=300,000) or sleeps at once
(`OMP_WAIT_POLICY=PASSIVE`). The two cost in opposite cases (`benchmarks/two_runs.py`,
`benchmarks/results/two_runs.md`):

- a run alone on its cores: sleeping threads pay a wake-up at every region, and a model this small runs
  thousands of short regions a step, so the run is much slower than with spinning threads;
- runs that share cores: a spinning thread holds a core the other run's threads need, while its own team's
  thread that it waits for is descheduled, and both runs stall.

So when this process starts (before torch is loaded: libgomp reads the variables once), it counts the other
threads on the machine that are runnable: the kernel's count of runnable threads (`/proc/loadavg`, 4th field)
less this process's own one thread, the fewest over a few looks a couple of milliseconds apart. If they hold
at least half of the cores this process may use (one of two), the machine is busy and fedlab sets
`OMP_WAIT_POLICY=PASSIVE`; otherwise it leaves libgomp's spinning default. A run that starts second on a busy machine therefore sleeps, and the first run's
spinning then costs neither (the page's staggered row). A user's own `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT` is
kept, and the decision is inherited by the processes fedlab starts (their environment carries it). The wait
policy changes no number: it decides when a thread looks for work, not what it computes.
"""
from __future__ import annotations

import os
import time

VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
LOADAVG = "/proc/loadavg"
# why this process's policy is what it is, for `fedlab doctor`
decision = "not decided (fedlab.idle_threads.apply has not run)"


def runnable(text: str) -> int:
    """The number of runnable threads in a /proc/loadavg line ("0.52 0.58 0.59 3/467 12345": 3)."""
    return int(text.split()[3].split("/")[0])


def others_running(looks: int = 5, gap: float = 0.002, path: str = LOADAVG) -> int | None:
    """The fewest threads other than this process's one that were runnable over `looks` looks at the kernel's
    count, `gap` seconds apart; None where the count cannot be read (no /proc: not Linux)."""
    seen = []
    for i in range(looks):
        try:
            with open(path) as f:
                seen.append(runnable(f.read()))
        except (OSError, IndexError, ValueError):
            return None
        if i + 1 < looks:
            time.sleep(gap)
    return min(seen) - 1


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def apply(probe=others_running, cores=cores) -> None:
    """Set OMP_WAIT_POLICY=PASSIVE where other runnable threads hold at least half of this process's cores
    (`probe()` against `cores()`); leave libgomp's spinning default on a freer machine, where the count cannot
    be read, and wherever the user set either variable."""
    global decision
    own = [k for k in VARIABLES if k in os.environ]
    if own:
        decision = "the user's own " + ", ".join(f"{k}={os.environ[k]}" for k in own)
        return
    others, n = probe(), cores()
    if others is not None and others >= max(1, n // 2):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        decision = (f"OMP_WAIT_POLICY=PASSIVE: {others} other thread(s) were runnable on {n} core(s) when this "
                    "process started, so idle threads sleep instead of spinning on cores another process needs")
    else:
        decision = ("libgomp's default (idle threads spin about 3 ms, then sleep): "
                    + (f"{LOADAVG} could not be read" if others is None else
                       f"{others} other thread(s) were runnable on {n} core(s) when this process started"))
