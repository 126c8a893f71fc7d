"""Who owns a lab, written where the next run can read it: the crash cleanup of labs.

A lab (a Mininet lab of `p4netem measure`, `lab up`, `experiment run`, or a test's TwoHostLab)
cleans up after itself when it closes, also on Ctrl-C and SIGTERM. A SIGKILL (or a machine that
runs out of memory) gives it no chance: its namespaces, veths, switch and servers stay. So every
lab leaves a record behind, before it creates anything, in RUN_DIR (`/run/p4netem/labs`, a tmpfs
that a reboot empties together with the namespaces; env P4NETEM_RUN_DIR):

    {prefix}.json  {"prefix": "p4n000ya002", "owner": {"pid": 1234, "start": 56789, "boot": "..."},
                    "kind": "mininet", "command": [...], "created": 1700000000.0,
                    "namespaces": [...], "links": [...], "processes": [{"pid": .., "start": ..}],
                    "netns_ids": {"my-ns": 4097}, "dirs": [...]}

The owner is the process that built the lab, identified by pid *and* start time (field 22 of
/proc/PID/stat, clock ticks since boot) and the boot id, so a pid reused by another process is not
mistaken for the owner. `clean_dead_labs()` removes exactly the labs whose owner is dead: the
processes of the record (checked against their start time too), every process in the lab's
namespaces, the namespaces and links of the record, then the record. Names the record does not
list are removed only when they carry the record's own token (tokens.py: fixed-width, so no
other lab's name begins with it); a record whose prefix is not "p4n" and a token of its owner (a
record of an older version, a hand-made one) has exactly its listed names removed, never all that
begin with its prefix: `p4n2s1` began the names of the live lab `p4n2s10`. A namespace whose
name the lab did not make from its token (a LabHost's in a user's own Mininet script: any name)
is listed with its kernel cookie (`netns_ids`, netns_cookie()), and removed only while the name
still holds that namespace: the name may have been taken again by a live lab since. A lab whose
owner lives is never touched, whoever calls; only its owner may remove it the same way
(`tear_down_own_labs()`), when its orderly close cannot finish.

Every lab's owner also starts its reaper (reaper.py) before its first record: a detached process
that removes the owner's labs the moment it dies, so a SIGKILL leaves nothing for long.

Two cleaners may run at once (parallel runs starting together): each claims a record by renaming
it, so one lab is cleaned once.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import tokens

# Lab records are written by every thread of a lab (see LabRecord.save).
_SAVE_LOCK = threading.RLock()

__all__ = ["RUN_DIR", "Owner", "LabRecord", "CleanedLab", "CleanupReport", "clean_dead_labs", "links",
           "netns_cookie", "netns_names", "open_record", "parent_pid", "record_exists", "run_dir",
           "start_ticks", "tear_down_own_labs"]

RUN_DIR = Path("/run/p4netem/labs")


def run_dir() -> Path:
    return Path(os.environ.get("P4NETEM_RUN_DIR", RUN_DIR))


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat(pid: int) -> list[str] | None:
    """Fields 3 on of /proc/PID/stat (state first) of a live process; None when there is no such
    process (or only its zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # comm (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    rest = stat[stat.rindex(")") + 2:].split()
    return None if rest[0] == "Z" else rest


def start_ticks(pid: int) -> int | None:
    """Start time of a live process (clock ticks since boot), None when there is no such process
    (or only its zombie)."""
    rest = _stat(pid)
    return None if rest is None else int(rest[19])


def parent_pid(pid: int) -> int | None:
    """The parent of a live process, None when there is no such process (or only its zombie)."""
    rest = _stat(pid)
    return None if rest is None else int(rest[1])


@dataclass(frozen=True)
class Owner:
    pid: int
    start: int
    boot: str

    @classmethod
    def current(cls) -> "Owner":
        pid = os.getpid()
        return cls(pid, start_ticks(pid) or 0, _boot_id())

    def alive(self) -> bool:
        return self.boot == _boot_id() and start_ticks(self.pid) == self.start

    def to_json(self) -> dict:
        return {"pid": self.pid, "start": self.start, "boot": self.boot}


@dataclass
class LabRecord:
    """The record one lab keeps in run_dir() while it exists. Create it with `open()` before the
    lab makes anything; note what it makes (`add_*`); `remove()` once it is all gone."""

    prefix: str
    owner: Owner
    kind: str
    command: list[str] = field(default_factory=list)
    created: float = 0.0
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)
    path: Path | None = None
    dirs: list[str] = field(default_factory=list)  # the lab's temporary directories (add_dir)
    # Namespaces named by the lab's user, not from its token: name -> netns_cookie() (add_namespace)
    netns_ids: dict[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, prefix: str, kind: str) -> "LabRecord":
        record = cls(prefix, Owner.current(), kind, list(sys.argv), time.time())
        record.path = run_dir() / f"{prefix}.json"
        record.save()
        return record

    def to_json(self) -> dict:
        return {"prefix": self.prefix, "owner": self.owner.to_json(), "kind": self.kind,
                "command": self.command, "created": self.created, "namespaces": self.namespaces,
                "links": self.links, "processes": self.processes, "dirs": self.dirs,
                "netns_ids": self.netns_ids}

    @classmethod
    def from_json(cls, doc: dict, path: Path) -> "LabRecord":
        o = doc["owner"]
        return cls(str(doc["prefix"]), Owner(int(o["pid"]), int(o["start"]), str(o["boot"])),
                   str(doc.get("kind", "")), list(doc.get("command", [])), float(doc.get("created", 0)),
                   list(doc.get("namespaces", [])), list(doc.get("links", [])),
                   list(doc.get("processes", [])), path, list(doc.get("dirs", [])),
                   {str(k): int(v) for k, v in doc.get("netns_ids", {}).items()})

    def save(self) -> None:
        # Threads of one lab add to it at once (two probes starting their receivers): one
        # writer at a time, each with a temporary file of its own, or a rename finds the other
        # thread's file already gone (FileNotFoundError in the probe that lost the race).
        assert self.path is not None
        with _SAVE_LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(self.to_json()))
            os.replace(tmp, self.path)  # a reader sees the old record or the new one, never half

    def add_namespace(self, name: str, cookie: int | None = None) -> None:
        """`cookie`: the namespace's netns_cookie(), for a name not made from the lab's token: a
        cleaner then removes the name only while it still holds that namespace."""
        with _SAVE_LOCK:
            self.namespaces.append(name)
            if cookie is not None:
                self.netns_ids[name] = cookie
        self.save()

    def add_link(self, name: str) -> None:
        with _SAVE_LOCK:
            self.links.append(name)
        self.save()

    def add_names(self, namespaces: list[str], links: list[str]) -> None:
        """Many namespaces and links at once, in one save (a Mininet lab's, before it builds:
        one save per name of a 509-host lab would write its growing record a thousand times)."""
        with _SAVE_LOCK:
            self.namespaces.extend(namespaces)
            self.links.extend(links)
        self.save()

    def add_process(self, pid: int) -> None:
        """A process of the lab outside its namespaces (the switch runs in the root namespace)."""
        start = start_ticks(pid)
        if start is not None:
            with _SAVE_LOCK:
                self.processes.append({"pid": pid, "start": start})
            self.save()

    def add_dir(self, path: str | Path) -> None:
        """A temporary directory of the lab's (pages, endpoints' files, captures), for a cleaner to
        remove if the owner dies; only `p4n-*` directories right in the temporary directory are."""
        with _SAVE_LOCK:
            self.dirs.append(str(path))
        self.save()

    def remove(self) -> None:
        if self.path is not None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass


def record_exists(prefix: str, directory: Path | None = None) -> bool:
    """Whether a lab of `prefix` is recorded in `directory` (default run_dir()), or being cleaned."""
    directory = directory or run_dir()
    try:
        # The record first, then a cleaner's claim: a cleaner renames the one into the other.
        return (directory / f"{prefix}.json").exists() or any(directory.glob(f".{prefix}.json.cleaning-*"))
    except OSError:
        return False            # a directory we may not read (not root): no lab of ours is in it


def open_record(prefix: str, kind: str) -> LabRecord | None:
    """LabRecord.open, or None with a warning when run_dir() cannot be written: the lab still
    works, only a crash of its owner would leave it for `ip netns` by hand.

    Starts this process's reaper first (once per process): if the owner is killed outright, its
    labs go at once, not when the next lab starts or someone runs `p4netem lab clean`."""
    from . import reaper
    try:
        reaper.watch_this_process_once()
    except OSError as exc:
        _warn(f"warning: {exc}; if this process is killed outright, its labs stay until the next "
              "lab starts or `p4netem lab clean` runs")
    try:
        return LabRecord.open(prefix, kind)
    except OSError as exc:
        _warn(f"warning: cannot record lab {prefix} in {run_dir()} ({exc.strerror or exc}): if this "
              "process is killed, `p4netem lab clean` will not find it")
        return None


def _warn(text: str) -> None:
    """One line on stderr. Not this module's logger: imported after Mininet (a user's own script
    imports it first), that is Mininet's logger class, which ends no line."""
    print(text, file=sys.stderr, flush=True)


@dataclass
class CleanedLab:
    prefix: str
    kind: str
    owner_pid: int
    namespaces: list[str]
    links: list[str]
    processes: list[int]
    problems: list[str]
    owner_alive: bool = False      # True when its owner tore it down itself (tear_down_own_labs)

    def describe(self) -> str:
        parts = [f"{len(self.namespaces)} namespace(s)", f"{len(self.links)} link(s)",
                 f"{len(self.processes)} process(es)"]
        owner = f"pid {self.owner_pid}" if self.owner_alive else f"dead pid {self.owner_pid}"
        text = f"{self.prefix} ({self.kind or 'lab'} of {owner}): removed {', '.join(parts)}"
        return text + (f"; left: {'; '.join(self.problems)}" if self.problems else "")


@dataclass
class CleanupReport:
    cleaned: list[CleanedLab] = field(default_factory=list)
    live: list[str] = field(default_factory=list)  # prefixes of labs whose owner runs
    unreadable: list[str] = field(default_factory=list)  # record files that could not be read

    def __bool__(self) -> bool:
        return bool(self.cleaned or self.unreadable)

    def lines(self) -> list[str]:
        out = [lab.describe() for lab in self.cleaned]
        out += [f"{name}: unreadable record, left alone" for name in self.unreadable]
        return out

    def to_json(self) -> dict:
        return {"cleaned": [lab.__dict__ for lab in self.cleaned], "live": self.live,
                "unreadable": self.unreadable}


def clean_dead_labs(directory: Path | None = None, owner: Owner | None = None) -> CleanupReport:
    """Remove every lab recorded in `directory` (default run_dir()) whose owner is dead; labs of
    live owners (this process's too) are left alone. `owner`: only that (dead) owner's labs (its
    reaper). Safe to call from any number of processes at once. Needs root (namespaces)."""
    directory = directory or run_dir()
    report = CleanupReport()
    if not directory.is_dir():
        return report
    # A cleaner that died while cleaning left its claim: take it over.
    for claim in directory.glob(".p4n*.json.cleaning-*"):
        cleaner = claim.name.rsplit("-", 1)[1]
        if cleaner.isdigit() and start_ticks(int(cleaner)) is None:
            try:
                os.rename(claim, directory / claim.name[1:].rsplit(".cleaning-", 1)[0])
            except OSError:
                pass
    for path, record in _records(directory, report):
        if owner is not None and record.owner != owner:
            continue
        if record.owner.alive():
            report.live.append(record.prefix)
            continue
        _claim_and_clean(path, record, report, owner_alive=False)
    return report


def tear_down_own_labs(directory: Path | None = None) -> CleanupReport:
    """Remove every lab recorded in `directory` (default run_dir()) whose owner is this process,
    the way `clean_dead_labs` removes a dead owner's: the last resort of a process that must go
    now and whose own orderly close did not finish (a lab process told to stop by its dead
    driver, stuck in a teardown step that waits forever). Other owners' labs are left alone."""
    directory = directory or run_dir()
    report = CleanupReport()
    if not directory.is_dir():
        return report
    me = Owner.current()
    for path, record in _records(directory, report):
        if record.owner == me:
            _claim_and_clean(path, record, report, owner_alive=True)
    return report


def _records(directory: Path, report: CleanupReport):
    """(path, record) of every readable lab record in `directory`; unreadable ones are noted in
    the report and skipped."""
    for path in sorted(directory.glob("p4n*.json")):
        try:
            record = LabRecord.from_json(json.loads(path.read_text()), path)
        except FileNotFoundError:
            continue  # its owner closed it, or another cleaner claimed it
        except (OSError, ValueError, KeyError, TypeError):
            report.unreadable.append(path.name)
            continue
        yield path, record


def _claim_and_clean(path: Path, record: LabRecord, report: CleanupReport, *, owner_alive: bool) -> None:
    claimed = path.with_name(f".{path.name}.cleaning-{os.getpid()}")
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return  # another cleaner was first
    cleaned = _clean(record)
    cleaned.owner_alive = owner_alive
    report.cleaned.append(cleaned)
    claimed.unlink(missing_ok=True)


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def netns_names() -> list[str]:
    """Every named network namespace on the machine."""
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def links() -> list[str]:
    """Every interface of the root namespace, by name (a veth's peer suffix `@...` cut)."""
    out = _run(["ip", "-o", "link", "show"]).stdout.splitlines()
    return [line.split(":")[1].strip().split("@")[0] for line in out if line.count(":") >= 2]


NETNS_RUN_DIR = Path("/run/netns")   # where `ip netns` names namespaces


def _ns_id(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _netns_pids(names: list[str]) -> list[int]:
    """Every process in the named namespaces, as `ip netns pids` finds them (the namespace file of
    each process against the name's), in one pass over /proc for all of them."""
    wanted = {i for i in (_ns_id(NETNS_RUN_DIR / n) for n in names) if i is not None}
    if not wanted:
        return []
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _ns_id(f"/proc/{entry.name}/ns/net") in wanted:
            pids.append(int(entry.name))
    return pids


_CLONE_NEWNET = 0x40000000
_SO_NETNS_COOKIE = 71       # Linux 5.14; include/uapi/asm-generic/socket.h


def netns_cookie(path: str | Path) -> int | None:
    """The kernel's cookie of the network namespace at `path` (`/run/netns/NAME`,
    `/proc/PID/ns/net`): a number no other namespace gets until the next boot, where a gone
    namespace's inode number goes to the next one made. None when there is no such namespace or
    the kernel has no cookies (before 5.14).

    Read from a socket made in that namespace by a thread of its own, which enters it (setns
    applies to the calling thread only) and ends: the process's other threads stay where they
    are."""
    found: list[int] = []

    def probe() -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
                return
        finally:
            os.close(fd)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                found.append(int.from_bytes(sock.getsockopt(socket.SOL_SOCKET, _SO_NETNS_COOKIE, 8),
                                            sys.byteorder))
        except OSError:
            pass

    thread = threading.Thread(target=probe, name="netns-cookie")
    thread.start()
    thread.join()
    return found[0] if found else None


def _kill(started: dict[int, int]) -> list[int]:
    """SIGTERM, then SIGKILL after 3 s, to the processes of `started` ({pid: start ticks}) that are
    still those. Each is signalled through a pidfd opened while its start time matched, so a pid
    that ends and is given to another process meanwhile (another lab's) is never signalled; by pid
    after the same check where the kernel has no pidfds (before 5.3). Returns the pids that would
    not go."""
    fds: dict[int, int | None] = {}
    for pid, start in started.items():
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        except OSError:
            fd = None
        if start_ticks(pid) != start:         # gone, or the pid is another process's now
            if fd is not None:
                os.close(fd)
            continue
        fds[pid] = fd
    pending = list(fds)
    try:
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
            for pid in pending:
                try:
                    if fds[pid] is not None:
                        signal.pidfd_send_signal(fds[pid], sig)
                    elif start_ticks(pid) == started[pid]:
                        os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while True:
                pending = [p for p in pending if start_ticks(p) == started[p]]
                if not pending or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            if not pending:
                break
    finally:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)
    return pending


def stop_processes(namespaces: list[str], outside: dict[int, int] | None = None) -> tuple[list[int], list[int]]:
    """Stops every process in `namespaces` (they are the lab's: a server that daemonized, `cmd &`)
    and those of `outside` ({pid: start ticks}, the lab's processes elsewhere, such as its switch)
    while pid and start time still match: SIGTERM, then SIGKILL. Returns the pids it stopped and
    those that would not end. A namespace deleted with a process still in it lives on with that
    process, unnamed."""
    me = os.getpid()
    started = dict(outside or {})
    killed: set[int] = set()
    stuck: list[int] = []
    # Listed again after each round: a process may fork while the last ones end (a shell running
    # a command), and whatever stays keeps its namespace, unnamed, for good.
    for _ in range(3):
        started.update({p: start_ticks(p) for p in _netns_pids(namespaces) if p != me})
        started = {p: t for p, t in started.items() if t is not None and start_ticks(p) == t}
        if not started:
            stuck = []
            break
        killed.update(started)
        stuck = _kill(started)
        started = {p: started[p] for p in stuck}
    return sorted(killed), stuck


def _token_prefix(record: LabRecord) -> str | None:
    """The record's prefix when it is "p4n" and a token of its owner (tokens.py): no other lab's
    name begins with it, so names beginning with it are this lab's even when the record does not
    list them. None for any other prefix, whose lab owns only the names it lists: `p4n2s1`, a
    token of old, began `p4n2s10...`, the names of another, live lab."""
    token = record.prefix.removeprefix(tokens.PREFIX)
    if record.prefix.startswith(tokens.PREFIX) and tokens.is_token(token) \
            and tokens.pid_of(token) == record.owner.pid:
        return record.prefix
    return None


def _clean(record: LabRecord) -> CleanedLab:
    problems: list[str] = []
    prefix = _token_prefix(record)

    def named(name: str) -> bool:
        return prefix is not None and name.startswith(prefix)

    namespaces = sorted(set(record.namespaces) | {n for n in netns_names() if named(n)})
    # A name the lab's user chose is the lab's only while it holds the namespace the lab named:
    # another lab may have taken the name since (gone, or never made: the owner died first).
    namespaces = [n for n in namespaces if n not in record.netns_ids
                  or netns_cookie(NETNS_RUN_DIR / n) == record.netns_ids[n]]
    # Processes outside the namespaces (the switch): only while pid and start time still match.
    killed, stuck = stop_processes(namespaces, {int(p["pid"]): int(p["start"]) for p in record.processes})
    if stuck:
        problems.append(f"processes {stuck} would not end")
    for ns in namespaces:
        r = _run(["ip", "netns", "delete", ns])
        if r.returncode != 0 and ns in netns_names():
            problems.append(f"namespace {ns}: {r.stderr.strip()}")
    deleted = sorted(set(record.links) | {l for l in links() if named(l)})
    for link in deleted:
        _run(["ip", "link", "delete", link])  # gone already when its namespace went: fine
    left = [l for l in links() if named(l) or l in record.links]
    if left:
        problems.append(f"links {left}")
    for d in record.dirs:
        path = Path(d)
        # Only what a lab makes (tempfile.mkdtemp(prefix="p4n-...")): a damaged or forged record
        # must not turn the cleaner, which runs as root, on any other directory.
        if path.parent == Path(tempfile.gettempdir()) and path.name.startswith("p4n-") and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
    return CleanedLab(record.prefix, record.kind, record.owner.pid, namespaces, deleted, killed, problems)
