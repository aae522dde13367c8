"""Starting or joining Ray, for the Ray backend and the sweeps.

- no address (the default): a Ray of fedlab's own on this machine, always new (`address="local"`): a
  running cluster, `RAY_ADDRESS`, or the address file a stopped `ray start` leaves behind are not joined;
- "auto": the cluster running on this machine (`ray start --head` on it);
- "host:port" (or "ray://host:port"): that cluster, whose port is probed first, so an unreachable address
  fails in seconds with one line instead of minutes of Ray's connection warnings.
"""
from __future__ import annotations

import os
import socket

from fedlab.validation import ConfigError

PROBE_SECONDS = 5.0


def _host_port(address: str) -> tuple[str, int] | None:
    rest = address.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    return (host or "127.0.0.1", int(port)) if port.isdigit() else None


def _running_address() -> str | None:
    """The address of the cluster started on this machine, as `ray.init(address="auto")` would find it."""
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env
    try:
        from ray._private.utils import read_ray_address

        return read_ray_address()
    except Exception:  # a Ray without this helper: let ray.init find it
        return None


def check_address(address: str | None, key: str = "backend.address") -> None:
    """One line (a ConfigError) when `address` names a cluster nobody answers at."""
    if not address or address == "local":
        return
    target = _running_address() if address == "auto" else address
    if target is None:
        raise ConfigError(f"{key}: 'auto' found no Ray cluster running on this machine; start one with "
                          "`ray start --head`, or leave it unset for a Ray of fedlab's own")
    hp = _host_port(target)
    if hp is None:
        raise ConfigError(f"{key}: {address!r} is not allowed; expected 'auto', host:port or ray://host:port")
    try:
        socket.create_connection(hp, timeout=PROBE_SECONDS).close()
    except OSError as e:
        raise ConfigError(f"{key}: no Ray cluster answers at {target} ({e.strerror or type(e).__name__}); "
                          "start one with `ray start --head`, or leave it unset for a Ray of fedlab's own") from None


def connect(address: str | None = None, num_cpus: int | None = None, key: str = "backend.address") -> None:
    """Start or join Ray as the module docstring says (nothing when this process is connected already)."""
    import ray

    if ray.is_initialized():
        return
    common = dict(include_dashboard=False, logging_level="ERROR", log_to_driver=True)
    if not address or address == "local":
        ray.init(address="local", num_cpus=num_cpus, **common)
        return
    check_address(address, key)
    try:
        ray.init(address=address, **common)
    except ConnectionError as e:
        raise ConfigError(f"{key}: no Ray cluster answers at {address!r} ({str(e).splitlines()[0]})") from None
