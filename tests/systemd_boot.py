"""A real systemd booted as PID 1 for a test, on this machine's own root filesystem (shared by the
tests of the shipped systemd unit; tests/ is on sys.path through its conftest).

Where PID 1 is not systemd (a container, as on the development machine and in CI), Debian's
/lib/systemd/systemd still boots as the init of new PID, mount, cgroup, UTS and IPC namespaces,
as systemd-nspawn would start it, but with nothing more installed and the host's own root:
- the root is an overlay of the host's `/` under a tmpfs (everything systemd and the test write,
  /etc/systemd/system included, is gone with the mount namespace), the tree under test bound
  read-only at its own path, /run/p4netem (the switches' port locks) bound from the host;
- /proc/sys and /sys read-only (no boot unit may change a host sysctl; systemd-udevd and
  systemd-sysctl skip themselves), a /dev of its own (tmpfs) holding only the nodes a service
  needs and /dev/cpu_dma_latency (the switch's PM QoS request), so systemd-tmpfiles creates no
  node in the host's /dev; no CAP_SYS_MODULE (no modprobe@ unit loads a module into the kernel);
- a cgroup v2 hierarchy of its own: a child cgroup made in the host's cgroup2 mount (the
  `unified` one of a hybrid host like this one) is the root of its cgroup namespace, where it
  mounts cgroup2 at /sys/fs/cgroup (systemd 252 runs its units in cgroup v2);
- the host's network namespace, as the unit runs on a real box (its ports are the host's veths);
- it boots to sysinit.target only, so none of the host's enabled services (nginx, PostgreSQL,
  Prometheus, getty) start: the units a test starts pull in what they need.
Commands run inside with `nsenter` into its mount and PID namespaces (systemctl, journalctl).
Killing PID 1 ends every process of the PID namespace, and with it the mounts; close() then
removes the cgroups.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

SYSTEMD = Path("/lib/systemd/systemd")
CGROUP_PREFIX = "p4netem-test-systemd-"

# Run as PID 1 of the new namespaces by `unshare --fork`: builds the root, then execs systemd.
# $1: an empty directory for the overlay's tmpfs; $2...: paths bound read-only at the same place.
_BOOT = r"""
set -eu
B=$1; shift
mount --make-rprivate /
mount -t tmpfs -o mode=755 p4netem-test-root "$B"
mkdir "$B/upper" "$B/work" "$B/root"
R=$B/root
mount -t overlay p4netem-test-root -o "lowerdir=/,upperdir=$B/upper,workdir=$B/work" "$R"
mount -t proc proc "$R/proc"
mount --bind "$R/proc/sys" "$R/proc/sys"; mount -o remount,bind,ro "$R/proc/sys"
if [ -e /proc/sysrq-trigger ]; then
  mount --bind /proc/sysrq-trigger "$R/proc/sysrq-trigger"; mount -o remount,bind,ro "$R/proc/sysrq-trigger"
fi
mount -t sysfs -o ro sysfs "$R/sys"
mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup"
mount -t tmpfs -o mode=755,nosuid dev "$R/dev"
for n in null zero full random urandom tty cpu_dma_latency; do
  if [ -e "/dev/$n" ]; then touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; fi
done
touch "$R/dev/console"; mount --bind /dev/null "$R/dev/console"
mkdir "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
ln -s /proc/self/fd "$R/dev/fd"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$R/dev/shm"
mount -t tmpfs -o mode=755,nosuid,nodev run "$R/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$R/tmp"
mkdir -p /run/p4netem "$R/run/p4netem"; mount --bind /run/p4netem "$R/run/p4netem"
for p in "$@"; do
  if [ -d "$p" ]; then mkdir -p "$R$p"; else mkdir -p "$(dirname "$R$p")"; touch "$R$p"; fi
  mount --bind "$p" "$R$p"; mount -o remount,bind,ro "$R$p"
done
cd "$R"; mkdir -p .oldroot; pivot_root . .oldroot; umount -l /.oldroot; rmdir /.oldroot
exec setpriv --bounding-set -sys_module env -i container=p4netem-test \
  "$0" --unit=sysinit.target --log-target=journal-or-kmsg
"""


def _cgroup2_hierarchy() -> tuple[Path, Path] | None:
    """(the cgroup2 mount point, this process's cgroup in it), from /proc/self/mountinfo and
    /proc/self/cgroup; None without a cgroup2 mount (a host in cgroup v1 only)."""
    mounts = [line.split(" - ") for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    points = [Path(left.split()[4]) for left, right in mounts if right.split()[0] == "cgroup2"]
    own = [line.partition("0::")[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
           if line.startswith("0::")]
    if not points or not own:
        return None
    return points[0], points[0] / own[0].lstrip("/")


def missing() -> str | None:
    """What this machine's set-up lacks for booting systemd (root, systemd's binary): a failure
    to fix, not a reason to skip."""
    if os.geteuid() != 0:
        return "needs root (namespaces, mounts, cgroups)"
    if not os.access(SYSTEMD, os.X_OK):
        return f"{SYSTEMD} is missing: scripts/setup-system.sh installs it (Debian: systemd)"
    return None


def cannot_boot() -> str | None:
    """Why the kernel or the container this runs in cannot boot systemd as PID 1 (None: it can),
    naming the check that decides: overlayfs, a writable cgroup2 hierarchy, and the namespaces
    (unshare of PID, mount, cgroup, UTS and IPC namespaces, which an unprivileged container or a
    seccomp filter refuses). Run as root (see missing())."""
    filesystems = Path("/proc/filesystems").read_text().split()
    if "overlay" not in filesystems:
        return "the kernel has no overlayfs (/proc/filesystems): no throw-away root for systemd"
    found = _cgroup2_hierarchy()
    if "cgroup2" not in filesystems or found is None:
        return "no cgroup2 hierarchy is mounted (/proc/self/mountinfo): systemd 252 needs cgroup v2 here"
    if not os.access(found[1], os.W_OK):
        return f"cannot make a cgroup in {found[1]} (read-only cgroup2: an unprivileged container)"
    r = subprocess.run(["unshare", "--pid", "--mount", "--cgroup", "--uts", "--ipc", "--fork", "true"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return f"cannot make PID/mount/cgroup/UTS/IPC namespaces (unshare: {r.stderr.strip()})"
    return None


_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _killed_with_us(parent: int):
    """A preexec_fn: SIGKILL to `unshare` when the test process dies, even killed outright; its
    --kill-child then kills PID 1, and the kernel the rest of the PID namespace: no systemd (and
    no switch holding the lab's ports) outlives a killed test run."""

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _remove_stale(parent: Path) -> None:
    """The empty cgroups of earlier runs killed before their close() (a busy one, another run's
    that still runs, stays)."""
    for old in parent.glob(f"{CGROUP_PREFIX}*"):
        try:
            for d in sorted((p for p in old.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                d.rmdir()
            old.rmdir()
        except OSError:
            pass


class BootedSystemd:
    """systemd booted as PID 1 (module docstring); `run` runs a command inside."""

    def __init__(self, workdir: Path, read_only: list[Path]) -> None:
        self.workdir = workdir
        self.read_only = read_only
        self.cgroup: Path | None = None
        self.pid: int | None = None  # PID 1's pid as this process sees it
        self.boot_s: float | None = None
        self._proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> BootedSystemd:
        found = _cgroup2_hierarchy()
        assert found is not None, cannot_boot()
        _remove_stale(found[1])
        self.cgroup = found[1] / f"{CGROUP_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
        self.cgroup.mkdir()
        mnt = self.workdir / "root"
        mnt.mkdir()
        log = (self.workdir / "boot.log").open("w")
        started = time.monotonic()
        try:
            # Into the new cgroup first: `unshare --cgroup` makes the cgroup it is in the root of
            # the namespace's hierarchy.
            self._proc = subprocess.Popen(
                ["sh", "-c", 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"', "sh", str(self.cgroup),
                 "unshare", "--pid", "--mount", "--cgroup", "--uts", "--ipc", "--fork", "--kill-child",
                 "--propagation", "private",
                 "sh", "-c", _BOOT, str(SYSTEMD), str(mnt), *map(str, self.read_only)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_killed_with_us(os.getpid()))
            init = self.cgroup / "init.scope" / "cgroup.procs"  # made by systemd once it runs as PID 1
            while not (init.exists() and init.read_text().split()):
                if self._proc.poll() is not None or time.monotonic() - started > timeout:
                    raise RuntimeError(f"systemd did not start as PID 1: {self._boot_log()}")
                time.sleep(0.05)
            self.pid = int(init.read_text().split()[0])
            while not self.path("/run/systemd/private").exists():  # systemctl's socket, made a moment later
                if self._proc.poll() is not None or time.monotonic() - started > timeout:
                    raise RuntimeError(f"systemd made no /run/systemd/private: {self._boot_log()}")
                time.sleep(0.05)
            r = self.run("systemctl", "is-system-running", "--wait", check=False, timeout=timeout)
            self.boot_s = time.monotonic() - started
            state = r.stdout.strip()
            if state != "running":
                if not state:
                    raise RuntimeError(f"systemctl is-system-running: exit {r.returncode}: {r.stderr}\n"
                                       f"{self._boot_log()}")
                failed = self.run("systemctl", "--failed", "--no-pager", check=False).stdout
                raise RuntimeError(f"systemd booted {state!r}, not running:\n{failed}\n{self.journal()}")
        except BaseException:
            self.close()
            raise
        finally:
            log.close()
        return self

    def _boot_log(self) -> str:
        return (self.workdir / "boot.log").read_text()

    def path(self, inside: str) -> Path:
        """A path of its root filesystem, as this process reaches it (/proc/PID/root)."""
        return Path(f"/proc/{self.pid}/root") / inside.lstrip("/")

    def run(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """A command run inside (its mounts, its PID namespace), with a plain environment."""
        assert self.pid is not None
        r = subprocess.run(["nsenter", "-t", str(self.pid), "-m", "-p", "--", *argv], capture_output=True,
                           text=True, timeout=timeout,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0"})
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.run("systemctl", "show", "-p", ",".join(props), unit).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, unit: str | None = None) -> str:
        return self.run("journalctl", "-b", "--no-pager", "-o", "short-monotonic",
                        *(["-u", unit] if unit else []), check=False).stdout

    def close(self) -> None:
        """PID 1 killed (the kernel then kills every process of its PID namespace and drops its
        mounts), its cgroups removed, deepest first."""
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # unshare, and PID 1 (its child) with it
            except ProcessLookupError:
                pass
            if self.pid is not None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._proc.wait(timeout=60)
            self._proc = None
        if self.cgroup is not None and self.cgroup.exists():
            deadline = time.monotonic() + 60
            while True:
                try:
                    for d in sorted((p for p in self.cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                        d.rmdir()
                    self.cgroup.rmdir()
                    break
                except OSError:  # EBUSY while a killed process is still being reaped
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            self.cgroup = None
