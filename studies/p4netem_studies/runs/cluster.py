"""Labs as Ray actors (`--ray auto` or `--ray HOST:PORT`).

Each actor owns one lab on its node (LabWorker: the same code as a local lab process) and runs
one job at a time; every result comes back to the driver, which stores it (only the driver
writes the store). An actor whose worker or node dies shows as RayActorError on its pending
call: the driver retries that job on a new actor, which Ray places on a live node.

Placement: an actor asks for one unit of the custom resource `p4netem_lab` when the cluster
advertises it (`ray start --resources '{"p4netem_lab": 4}'` says a node runs 4 labs), else for
half a CPU (most loads wait on slow links; capacity.py explains the weights).

Nodes must run as root with the project set up at the same path (`make setup`): the actor
imports p4netem_studies from its node's venv and runs the node's p4netem-switch.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time

from .worker import LabWorker

LAB_RESOURCE = "p4netem_lab"


class ClusterError(Exception):
    pass


def _probe(address: str, timeout: float = 5.0) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(f"--ray takes 'auto' or HOST:PORT (the head's GCS address, port "
                           f"6379 by default), not {address!r}")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(f"cannot reach a Ray cluster at {address}: {exc.strerror or exc}") from None


def connect(address: str):
    """Start a local Ray ('auto') or join the cluster at HOST:PORT; one-line errors."""
    try:
        import ray
    except ImportError:
        raise ClusterError("Ray is not installed (pip install ray; `make setup` does)") from None
    if ray.is_initialized():
        return ray
    import logging
    kwargs = dict(logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False,
                  configure_logging=True)
    if address == "auto":
        # A new local instance, never an unrelated cluster found on the machine.
        os.environ.pop("RAY_ADDRESS", None)
        try:
            ray.init(address="local", **kwargs)
        except Exception as exc:
            raise ClusterError(f"could not start a local Ray: {_one_line(exc)}") from None
        return ray
    _probe(address)
    # Ray prints its connection attempts on fd 2 from C++ before raising: keep them off the
    # user's terminal (in a file: the one reason its exception leaves out is among them), the
    # error below says what went wrong.
    saved = os.dup(2)
    with tempfile.TemporaryFile() as attempts:
        os.dup2(attempts.fileno(), 2)
        try:
            ray.init(address=address, **kwargs)
        except Exception as exc:
            attempts.seek(0)       # fd 2 is given back in `finally`, before this error leaves
            said = attempts.read()
            if b"InvalidAuthToken" in said or b"UNAUTHENTICATED" in said:
                # A head `ray start --head` put in token mode (it does so by itself when its
                # machine has a ~/.ray/auth_token, which any local ray.init() writes), and a
                # driver that sent no token or another one. Joining an address never turns
                # token mode on by itself, and doing it here would break clusters without it.
                if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
                    why = ("it refused this machine's authentication token (put the head's "
                           "~/.ray/auth_token here or its token in RAY_AUTH_TOKEN)")
                else:
                    why = ("it asks for Ray's token authentication: run with RAY_AUTH_MODE=token and "
                           "the head's token (its ~/.ray/auth_token here, or in RAY_AUTH_TOKEN)")
                raise ClusterError(f"could not join the Ray cluster at {address}: {why}") from None
            raise ClusterError(f"could not join the Ray cluster at {address}: {_one_line(exc)}") from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return ray


def _one_line(exc: BaseException) -> str:
    lines = [l for l in str(exc).splitlines() if l.strip()]
    return f"{type(exc).__name__}: {(lines[0] if lines else '')[:300]}"


# Ray's option (off by default) that makes the raylet a subreaper and SIGKILL every orphan of
# a worker that exited; the lab's reaper is one (measured: with it on, a ray.kill'ed actor's lab
# stayed; with it off, its reaper removed the lab).
SUBREAPER_OPTION = "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper"


def raylet_kills_orphans(environ) -> bool:
    """Whether the raylet that started this worker runs with SUBREAPER_OPTION (workers inherit
    the raylet's environment; Ray reads a boolean as "true" or "1", any case). The same option
    given in `_system_config` is not seen here."""
    return environ.get(SUBREAPER_OPTION, "").lower() in ("1", "true")


class RayLabHandle:
    def __init__(self, actor, lab_id: str, pending):
        self.actor = actor
        self.lab_id = lab_id
        self.pending = pending          # the ObjectRef of the call in flight
        self.kind = "up"                # what the pending call answers: up | result | closed
        self.closing = False

    def submit(self, job: dict) -> None:
        self.pending, self.kind = self.actor.run.remote(job), "result"

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.pending, self.kind = self.actor.close.remote(), "closed"

    def abort(self) -> None:
        """Kill the actor (its reaper removes the lab). The driver learns that it is gone from
        the call in flight, which then fails with RayActorError; a lab stopped with no call in
        flight (a Ctrl-C landing between a result and the next job: the result being stored,
        the next attempt being recorded) gets one, else nothing would ever answer for it and
        the stop waited out the driver's whole 60 s close deadline. `close`: if the kill did
        not take, the actor closes its lab in order."""
        import ray
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:
            pass
        if self.pending is None:
            self.closing = True
            self.pending, self.kind = self.actor.close.remote(), "closed"


class RayBackend:
    name = "ray"

    def __init__(self, address: str):
        self.ray = connect(address)
        self.address = address
        ray = self.ray
        resources = ray.cluster_resources()
        if resources.get(LAB_RESOURCE):
            opts = {"resources": {LAB_RESOURCE: 1}, "num_cpus": 0}
        else:
            opts = {"num_cpus": 0.5}
        self.actor_cls = ray.remote(max_restarts=0, max_task_retries=0, **opts)(_RayLab)

    def nodes(self) -> int:
        return sum(1 for n in self.ray.nodes() if n.get("Alive"))

    def capacity(self) -> int:
        res = self.ray.cluster_resources()
        if res.get(LAB_RESOURCE):
            return int(res[LAB_RESOURCE])
        return max(1, int(res.get("CPU", 1) / 0.5))

    def start_lab(self, session: dict, lab_id: str, index: int, shared: bool) -> RayLabHandle:
        actor = self.actor_cls.remote(session, lab_id, index, True)
        return RayLabHandle(actor, lab_id, actor.start.remote())

    def wait(self, labs: list[RayLabHandle], timeout: float):
        ray = self.ray
        refs = {l.pending: l for l in labs if l.pending is not None}
        if not refs:
            # Nothing can answer before `timeout`: wait it out, as the local backend blocks on its
            # labs' processes, rather than hand back at once (the driver's loops then spin a core).
            time.sleep(timeout)
            return []
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=timeout)
        if ready:
            more, _ = ray.wait([r for r in refs if r not in ready], num_returns=len(refs) - 1,
                               timeout=0) if len(refs) > 1 else ([], [])
            ready = list(ready) + list(more)
        out = []
        for ref in ready:
            lab = refs[ref]
            lab.pending = None
            try:
                value = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                out.append((lab, ("died", f"Ray actor died: {_one_line(exc)}")))
                continue
            except ray.exceptions.RayTaskError as exc:
                out.append((lab, ("error", _one_line(getattr(exc, "cause", None) or exc))))
                continue
            except Exception as exc:
                out.append((lab, ("died", _one_line(exc))))
                continue
            out.append((lab, (lab.kind, value)))
        return out

    def shutdown(self) -> None:
        pass


class _RayLab:
    """The actor: one LabWorker. It ends its lab when the driver closes it; if the actor is
    killed (ray.kill of a busy lab when the run stops, its driver's death), the reaper its
    LabWorker started removes the lab (p4netem.lab.reaper)."""

    def __init__(self, session: dict, lab_id: str, index: int, shared: bool):
        self.worker = LabWorker(session, lab_id=lab_id, index=index, shared=shared)

    def start(self) -> dict:
        import ray
        info = self.worker.start()
        # Several Ray nodes may share a host (ray.cluster_utils, tests): name the node too.
        info["node"] = f"{info['node']}/{ray.get_runtime_context().get_node_id()[:12]}"
        if raylet_kills_orphans(os.environ):
            info["warnings"].append(
                f"{SUBREAPER_OPTION} is on for this node's raylet: once a worker exits it "
                f"SIGKILLs the worker's orphans, this lab's reaper among them, so "
                f"{self.worker.killed_lab_stays()}")
        return info

    def run(self, job: dict) -> dict:
        return self.worker.run(job)

    def close(self) -> dict:
        return self.worker.close()
