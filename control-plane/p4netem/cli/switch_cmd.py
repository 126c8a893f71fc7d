"""`p4netem switch`: run p4netem-switch in the foreground on the given ports."""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..lab.netns import LabError, disable_offloads
from ..paths import switch_binary
from ..service_notify import ServiceNotifier
from ..stop_signals import StopSignals, held_for_children
from .apply_cmd import (MahimahiOpt, NetemDownlinkOpt, NetemNameOpt, NetemOpt, NetemUplinkOpt, ProfilesOpt, RuleOpt,
                        RulesFile, plan_apply, write_apply)
from .forward_cmd import parse_port_pairs
from .common import (DEFAULT_ADDR, EXIT_PROBLEM, EXIT_USAGE, DeviceId, ElectionId, SwitchAddr, connect, console,
                     error, guarded)

_PORT = re.compile(r"^(\d+)@(\S+)$")


def parse_ports(specs: list[str]) -> dict[int, str]:
    ports: dict[int, str] = {}
    for spec in specs:
        m = _PORT.match(spec)
        if not m or not 0 <= int(m.group(1)) <= 511:
            raise typer.BadParameter(f"{spec!r} is not N@IFACE with N in 0..511 (e.g. 1@veth1)",
                                     param_hint="'-i'")
        number = int(m.group(1))
        if number in ports or m.group(2) in ports.values():
            raise typer.BadParameter(f"{spec!r}: port or interface given twice", param_hint="'-i'")
        ports[number] = m.group(2)
    return ports


def parse_port_map(text: str, ports: dict[int, str]) -> dict[int, int]:
    text = text.strip().lower()
    if text == "none":
        return {}
    if text == "auto":
        if len(ports) == 2:
            a, b = sorted(ports)
            return {a: b, b: a}
        return {}
    return parse_port_pairs(text, "'--port-map'", ", auto or none")


def _listening(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=0.5):
            return True
    except (OSError, ValueError):
        return False


def _wait_grpc(proc: subprocess.Popen, addr: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"p4netem-switch exited with code {proc.returncode} during start-up (its log is above)")
        if _listening(addr):
            time.sleep(0.05)
            if proc.poll() is None:  # it is our switch that answers, not one that just died
                return
        time.sleep(0.05)
    raise LabError(f"p4netem-switch did not open {addr} within {timeout:g} s")


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child of a fork must not import
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> Callable[[], None]:
    """A preexec_fn: in the child before exec, SIGTERM when this CLI process dies, even by SIGKILL,
    so that a killed `p4netem switch` never leaves a switch running (and holding its ports) behind.
    A parent that died before the child asked (a stop in the moment after fork) sends nothing, so
    the child then checks that it still has its parent, and ends if not."""

    def preexec() -> None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class _Stopped(Exception):
    """SIGTERM reached `p4netem switch` (systemd's stop, a kill): raised in the main thread like
    Ctrl-C's KeyboardInterrupt, wherever it is (waiting for the switch to listen, writing --apply's
    profile, or waiting for it to end), so every stop is the same clean stop, exit 0."""


class _StopSignals(StopSignals):
    """The handler of SIGTERM and SIGINT while `p4netem switch` runs: each raises in the main thread
    (_Stopped, or KeyboardInterrupt for Ctrl-C) and is remembered. A stop that landed in subprocess's
    fork, in logging's at-fork callback, was printed as "Exception ignored" and lost, so the start-up
    went on and the CLI waited for a switch nobody stopped (about 1 stop in 20 sent as the switch
    process appeared; p4netem.stop_signals): `check()` raises it again where the start-up goes on,
    and the wait for the switch looks every second."""

    def __init__(self) -> None:
        super().__init__(lambda signum: KeyboardInterrupt() if signum == signal.SIGINT else _Stopped())


def _stop(proc: subprocess.Popen, sig: int = signal.SIGINT) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


class _SwitchUsage(Exception):
    """p4netem-switch refuses an option passed on to it: a usage error (exit 2)."""


def _check_switch_usage(cmd: list[str]) -> None:
    """The options passed on to p4netem-switch, checked by the switch's own parser before anything
    starts: `cmd --help` exits 2 with its message for an option it does not know or a bad value,
    0 (printing help) when all parse. A usage error is then exit 2 here too, as for our own
    options: otherwise the switch's exit 2 at start-up was `p4netem switch`'s exit 1, a failure
    that systemd's Restart=on-failure retried (5 times, RestartPreventExitStatus=2 notwithstanding)
    although retrying cannot fix a typo in /etc/default/p4netem."""
    try:
        r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return  # not runnable here: its start says why
    if r.returncode == 2:
        lines = [line for line in r.stderr.strip().splitlines()
                 if line.strip() and not line.startswith(("Usage:", "For more information"))]
        text = "\n".join(lines).removeprefix("error: ") or f"exit 2 ({shlex.join(cmd)})"
        raise _SwitchUsage(f"p4netem-switch refuses the options passed on to it: {text}")


def _start_profile(apply: str | None, netem: str | None, netem_uplink: str | None, netem_downlink: str | None,
                   mahimahi: str | None) -> tuple[list[str], str]:
    """Which sources of the start profile are given (as apply: a PROFILE, netem options, a Mahimahi
    chain) and the start profile's options as given (`--netem 'delay 40ms'`), for messages."""
    options = {"--apply": apply, "--netem": netem, "--netem-uplink": netem_uplink,
               "--netem-downlink": netem_downlink, "--mahimahi": mahimahi}
    given = {option: value for option, value in options.items() if value is not None}
    kinds = [kind for kind, members in (("--apply", ["--apply"]),
                                        ("--netem", ["--netem", "--netem-uplink", "--netem-downlink"]),
                                        ("--mahimahi", ["--mahimahi"])) if any(m in given for m in members)]
    return kinds, " ".join(f"{option} {shlex.quote(value)}" for option, value in given.items())


def _run_watched(proc: subprocess.Popen, stops: _StopSignals, notifier: ServiceNotifier, addr: str,
                 device_id: int) -> int:
    """Wait for the switch with stops.wait(), telling systemd's watchdog (WatchdogSec=) that it is
    alive, WATCHDOG=1, every quarter of the timeout for as long as its gRPC health check (service
    "") answers SERVING within another quarter: the switch answers NOT_SERVING while one of its
    data-plane threads has not run for --heartbeat-timeout-ms (deadlocked, spinning inside one loop
    turn, stopped: no forwarding, though its P4Runtime server answers), and nothing while the
    switch is stopped, hung or deadlocked under its control lock. So systemd kills the unit when the
    timeout passes and Restart= brings it back with its start profile. (A switch that exits needs no
    watchdog: the wait returns.) A switch without the health service (UNIMPLEMENTED: built before
    it) is vouched for while its P4Runtime server answers a Capabilities call, as before."""
    import grpc

    from ..p4rt import P4RuntimeClient, P4RuntimeError

    assert notifier.watchdog_s is not None
    quarter = notifier.watchdog_s / 4
    probe = P4RuntimeClient(addr, device_id=device_id, timeout=quarter)
    next_probe = 0.0

    def forwards() -> bool:
        try:
            return probe.health("", quarter) == "SERVING"
        except P4RuntimeError as err:
            if err.code != grpc.StatusCode.UNIMPLEMENTED:
                return False
        return probe.answers(quarter)

    def keep_alive() -> None:
        nonlocal next_probe
        if time.monotonic() < next_probe:
            return
        next_probe = time.monotonic() + quarter
        try:
            if not probe.connected:
                probe.connect(timeout=quarter, arbitrate=False)  # a channel, no controller
            if forwards():
                notifier.keep_alive()
        except P4RuntimeError:
            pass  # not answering: no keep-alive this time

    try:
        return stops.wait(proc, period=min(1.0, quarter), tick=keep_alive)
    finally:
        probe.close()


@guarded
def switch(
    ctx: typer.Context,
    interface: Annotated[Optional[list[str]], typer.Option(
        "--interface", "-i", metavar="N@IFACE",
        help="A switch port: P4 port number N on Linux interface IFACE (repeatable, as simple_switch_grpc).")] = None,
    port_map: Annotated[str, typer.Option(
        "--port-map", metavar="auto|none|IN:OUT,...",
        help="Port map installed once the switch is up. auto: with two ports, forward each to the other.")] = "auto",
    fix_offloads: Annotated[bool, typer.Option(
        "--fix-offloads", help="Turn off checksum/segmentation offloads on the interfaces first (ethtool -K).")] = False,
    pcap: Annotated[Optional[Path], typer.Option("--pcap", metavar="DIR", help="Write one pcap per port and direction.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="PRNG seed (reproducible loss/jitter).")] = None,
    cpu_port: Annotated[Optional[int], typer.Option("--cpu-port", help="P4 port for PacketIn/PacketOut.")] = None,
    binary: Annotated[Optional[Path], typer.Option("--binary", help="p4netem-switch to run (default: the build's).")] = None,
    apply: Annotated[Optional[str], typer.Option(
        "--apply", metavar="PROFILE",
        help="Apply this profile once the switch is up, before it reports running, as `p4netem apply "
             "PROFILE` (a built-in, a name from --profiles or a YAML file; with --rule/--rules). Checked "
             "before the switch starts; if it cannot be applied the switch is stopped (exit 1 or 3).")] = None,
    netem: NetemOpt = None,
    netem_uplink: NetemUplinkOpt = None,
    netem_downlink: NetemDownlinkOpt = None,
    mahimahi: MahimahiOpt = None,
    name: NetemNameOpt = None,
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Run p4netem-switch on the given ports, in the foreground.

    Runs p4netem-switch with its P4Runtime server on --switch; Ctrl-C (or SIGTERM) stops it
    cleanly. --apply PROFILE, or --netem 'OPTIONS' or --mahimahi 'COMMAND' (with apply's
    --rule/--rules/--profiles/--name), applies a profile before it reports running: at every start,
    for a service (docs/cli.md). Run by systemd as a Type=notify unit, it reports ready
    ($NOTIFY_SOCKET) once that profile is in force. Options it does not know are
    passed on to p4netem-switch (e.g. --rt-priority 0, --log-level debug; see p4netem-switch
    --help). Exit code: the switch's (0 after a clean stop); 1 if it fails to start or the start
    profile or its rules are invalid (checked before it starts); 2 if an option (ours, or one passed
    on that p4netem-switch refuses) is bad; 3 if the switch refuses its write."""
    ports = parse_ports(interface or [])
    mapping = parse_port_map(port_map, ports)
    kinds, start_profile = _start_profile(apply, netem, netem_uplink, netem_downlink, mahimahi)
    if not kinds and (rule or rules_file is not None or profiles):
        given = "--rule" if rule else "--rules" if rules_file is not None else "--profiles"
        raise typer.BadParameter(f"{given} says what the start profile applies to; give --apply PROFILE, "
                                 "--netem 'OPTIONS' or --mahimahi 'COMMAND' too", param_hint=f"'{given}'")
    if name is not None and not {"--netem", "--mahimahi"} & set(kinds):
        raise typer.BadParameter("names the profile made from --netem 'OPTIONS' or --mahimahi 'COMMAND'; "
                                 "give one of them too", param_hint="'--name'")
    if len(kinds) > 1:  # as apply: one source of the profile
        raise typer.BadParameter(f"give one start profile: --apply PROFILE, --netem 'OPTIONS' (or --netem-uplink, "
                                 f"--netem-downlink) or --mahimahi 'COMMAND', not {' and '.join(kinds)}",
                                 param_hint=f"'{kinds[1]}'")
    # apply's own checks, before anything starts: a bad profile, netem option, Mahimahi chain or rule
    # is exit 1 with apply's message, and a switch run as a service never comes up without the
    # profile it was given.
    plan = plan_apply(apply, netem=netem, netem_uplink=netem_uplink, netem_downlink=netem_downlink,
                      mahimahi=mahimahi, name=name, rule=rule, rules_file=rules_file,
                      profiles=profiles) if kinds else None
    if _listening(addr):
        # Otherwise the new switch fails to bind while every command talks to the old one.
        raise LabError(f"something already listens on {addr} (another switch?); stop it or pass "
                       "--switch HOST:PORT with a free port")
    exe = binary or switch_binary()
    if not exe.exists():
        raise LabError(f"switch binary {exe} not found: build it with `make build`")
    cmd = [str(exe), "--grpc-addr", addr, "--device-id", str(device_id)]
    for number, iface in sorted(ports.items()):
        cmd += ["-i", f"{number}@{iface}"]
    if pcap is not None:
        cmd += ["--pcap", str(pcap)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if cpu_port is not None:
        cmd += ["--cpu-port", str(cpu_port)]
    cmd += list(ctx.args)

    proc: subprocess.Popen | None = None
    applying = False
    # systemd (Type=notify) learns that the service is up from READY=1, sent once the start profile
    # is in force, not when this process runs: `systemctl start` and units ordered after this one
    # then find a shaping switch. Taken out of the environment: the switch must not inherit it.
    notifier = ServiceNotifier.from_environment()
    # SIGTERM to us stops the switch the same way Ctrl-C does (SIGINT reaches us as KeyboardInterrupt),
    # also during start-up: forwarding it to the switch then made the start-up fail (exit 1, or 3
    # while --apply wrote), and a service manager recorded a failed stop.
    stops = _StopSignals()
    previous = {sig: signal.signal(sig, stops) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        names = " ".join(f"{n}@{i}" for n, i in sorted(ports.items())) or "no ports"
        notifier.status(f"starting p4netem-switch on {names}")
        if ctx.args:  # (once SIGTERM is a clean stop: it may come while the check runs)
            _check_switch_usage(cmd)
        if fix_offloads:
            for iface in ports.values():
                disable_offloads(iface)
        stops.check()
        # SIGTERM and SIGINT held from before the fork until Popen has returned (as SwitchProcess
        # does): the switch inherits them blocked and takes one that came before its main, which
        # it reaches only after preexec_fn, exec and its dynamic loader, as a clean stop; killed
        # by it, it ended without its own shutdown. And our handler cannot raise inside Popen,
        # after the fork but before `proc` was set (the stop then had no switch to stop: the
        # command printed "stopped" and exited while the switch ran on), or in logging's at-fork
        # callback ("Exception ignored ... _Stopped" on stderr). It is raised as the block ends.
        with held_for_children():
            proc = subprocess.Popen(cmd, preexec_fn=_die_with_parent(os.getpid()))
        stops.check()  # a stop during the fork (see _StopSignals), taken by another thread
        _wait_grpc(proc, addr, timeout=30)
        stops.check()
        if mapping or plan is not None:
            with connect(addr, device_id, election_id, profiles=plan.known if plan else None) as ctl:
                if mapping:
                    ctl.set_port_map(mapping)
                if plan is not None:
                    notifier.status(f"applying {start_profile}")
                    applying = True
                    write_apply(ctl, plan)
                    applying = False
        pm = ", ".join(f"{a}->{b}" for a, b in sorted(mapping.items())) or "none"
        applied = f"; profile {plan.profile.name}" if plan is not None else ""
        console.print(f"p4netem-switch running (pid {proc.pid}): {names}; P4Runtime {addr} device {device_id}; "
                      f"port map {pm}{applied}. Ctrl-C stops it.", highlight=False)
        stops.check()
        notifier.ready(f"running: {names}; P4Runtime {addr}; port map {pm}{applied}")
        rc = _run_watched(proc, stops, notifier, addr, device_id) if notifier.watchdog_s else stops.wait(proc)
        notifier.status(f"p4netem-switch exited with code {rc}")  # a crash: `systemctl status` says so
    except (KeyboardInterrupt, _Stopped) as stop:
        notifier.stopping("stopping p4netem-switch")
        sig = signal.SIGINT if isinstance(stop, KeyboardInterrupt) else signal.SIGTERM
        rc = _stop(proc, sig) if proc is not None else 0
        if rc == -sig:  # ended by the very signal it was sent (before its own handler was set): as asked
            rc = 0
    except BaseException as exc:
        # Also when --apply fails: a switch running without the profile it was told to apply would
        # look like a working shaper that shapes nothing (and a service manager would not restart it).
        # No READY=1: to systemd the start failed.
        notifier.status(f"start-up failed: {exc or type(exc).__name__}")
        if proc is not None:
            _stop(proc, signal.SIGTERM)
        if applying:
            console.print(f"p4netem-switch stopped: {start_profile} failed (the error follows)", highlight=False)
        if isinstance(exc, _SwitchUsage):
            error(str(exc))
            raise typer.Exit(EXIT_USAGE) from None
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        notifier.close()
    if rc != 0:
        error(f"p4netem-switch exited with code {rc}")
        raise typer.Exit(EXIT_PROBLEM)
    console.print("p4netem-switch stopped", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("switch", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(switch)
