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
threads that are runnable on the machine: the kernel's count of runnable threads (`/proc/loadavg`, 4th field)
less this process's own one thread, the median of five looks two milliseconds apart. The count is the whole
host's, so it is set against the host's cores: if the other runnable threads fill at least half of them, the
machine is busy and fedlab sets `OMP_WAIT_POLICY=PASSIVE`; otherwise it leaves libgomp's spinning default. A run
that starts second on a busy machine therefore sleeps, and the first run's spinning then costs neither (the
page's staggered column). (In a container with a CPU quota but the host's cores in view, the bar is the host's:
such a run spins unless the host is busy.)

A user's own `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT` is kept. A value fedlab set is marked (`FEDLAB_IDLE_THREADS`)
so that the processes fedlab starts, which inherit it, decide again for themselves. Where torch was loaded
before fedlab, libgomp has read its variables already and nothing is set. The wait policy changes no number:
it decides when a thread looks for work, not what it computes.
"""
from __future__ import annotations

import os
import sys
import time

VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
MARK = "FEDLAB_IDLE_THREADS"          # set beside a policy fedlab chose, so that it is not taken for the user's
LOADAVG = "/proc/loadavg"
# why this process's policy is what it is, for `fedlab doctor` and the run's MLflow tag
decision = "not decided (fedlab.idle_threads.apply has not run)"


def without_policy(environ) -> dict:
    """A copy of `environ` without the wait variables or fedlab's mark of one: a child started with it decides
    for itself."""
    return {k: v for k, v in environ.items() if k not in (*VARIABLES, MARK)}


def runnable(text: str) -> int:
    """The number of runnable threads in a /proc/loadavg line ("0.52 0.58 0.59 3/467 12345": 3)."""
    return int(text.split()[3].split("/")[0])


def others_running(looks: int = 5, gap: float = 0.002, path: str = LOADAVG) -> int | None:
    """The median over `looks` looks, `gap` seconds apart, of the threads runnable on the machine other than
    this process's one (which is running as it reads); None where the count cannot be read (no /proc)."""
    seen = []
    for i in range(looks):
        try:
            with open(path) as f:
                seen.append(runnable(f.read()))
        except (OSError, IndexError, ValueError):
            return None
        if i + 1 < looks:
            time.sleep(gap)
    return max(0, sorted(seen)[len(seen) // 2] - 1)


def cores() -> int:
    """The host's cores: the scope of /proc/loadavg's count."""
    return os.cpu_count() or 1


def apply(probe=others_running, cores=cores, torch_loaded=lambda: "torch" in sys.modules) -> None:
    """Set OMP_WAIT_POLICY=PASSIVE (marked as fedlab's) where the other runnable threads fill at least half of
    the host's cores (`probe()` against `cores()`); leave libgomp's spinning default on a freer machine and where
    the count cannot be read; keep a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT; set nothing once torch is
    loaded."""
    global decision
    if torch_loaded():
        now = ", ".join(f"{k}={os.environ[k]}" for k in VARIABLES if k in os.environ) or "libgomp's default"
        decision = f"{now}, as libgomp read it when torch was loaded before fedlab (nothing set)"
        return
    if os.environ.get(MARK) and os.environ.get("OMP_WAIT_POLICY") == os.environ[MARK]:
        del os.environ["OMP_WAIT_POLICY"]              # a parent fedlab process chose it: decide again here
    os.environ.pop(MARK, None)
    own = [k for k in VARIABLES if k in os.environ]
    if own:
        decision = "the user's own " + ", ".join(f"{k}={os.environ[k]}" for k in own)
        return
    others, n = probe(), cores()
    if others is not None and others >= (n + 1) // 2:
        os.environ["OMP_WAIT_POLICY"] = os.environ[MARK] = "PASSIVE"
        decision = (f"OMP_WAIT_POLICY=PASSIVE: {others} other thread(s) were runnable on the host's {n} core(s) "
                    "when this process started, so idle threads sleep instead of spinning on cores another "
                    "process needs")
    else:
        decision = ("libgomp's default (idle threads spin about 3 ms, then sleep): "
                    + (f"{LOADAVG} could not be read" if others is None else
                       f"{others} other thread(s) were runnable on the host's {n} core(s) when this process "
                       "started"))
