"""`p4netem lab`: Mininet labs from topologies/*.yaml.

    p4netem lab list
    p4netem lab show dumbbell --param pairs=2
    p4netem lab up inline --profile hspa [--serve demo] [--cmd "client ping -c 3 server"]
    p4netem lab clean [--json]

`lab up` starts the lab (and, with --serve, nginx and the SPDY server with a generated page on
every server host), then opens Mininet's CLI, or runs the --cmd commands and exits (each checked
first: a line whose first word is no host and no CLI command is an error before the lab; every
line runs, and `lab up` exits 1 naming each that failed: a host command's non-zero status, a lab
command's error; Ctrl-C ends the script, exit 130). The lab's
CLI knows four more commands: `profile NAME[+radio]`, `iw N`, `load PROTOCOL [plain]` and
`hosts`. Namespaces, links and processes are removed on exit, on Ctrl-C, on SIGTERM and after a
failure. A lab whose process was killed outright (SIGKILL) is removed within seconds by the
process's reaper (p4netem.lab.reaper); where none could start, by `lab clean`, and by the next
`lab up`, `measure` or `experiment run`; never a lab whose owner still runs.
"""

from __future__ import annotations

import cmd as cmd_module
import os
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from p4netem.cli.common import EXIT_PROBLEM, error, stdout_console
from p4netem.cli.signals import Terminated, interrupt_on_termination
from p4netem.stop_signals import check_pending

from . import run_options

app = typer.Typer(help="Mininet labs: list, show and bring up topologies.", no_args_is_help=True)
console = stdout_console()
err = Console(stderr=True)


def parse_params(pairs: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        # ASCII digits only: str.isdigit() also takes "٣" (and int() reads it as 3).
        if not sep or not key or not (value.isascii() and value.isdigit()):
            raise typer.BadParameter(f"--param takes NAME=NUMBER, not {pair!r}")
        out[key] = int(value)
    return out


def check_commands(commands: list[str], topo) -> list[str]:
    """The problems (one line each, naming the --cmd; empty: none) of --cmd lines that Mininet's CLI
    would answer with "*** Unknown command" or "*** Please enter a command for node" and then go on,
    so that `lab up` would exit 0 having done nothing. The CLI (cmd.Cmd) runs a line whose first word
    is one of its commands (LabCLI's and Mininet's do_*: pingall, py, sh, profile, ...) or a node of
    the lab (the topology's hosts and the switch s1) followed by a command; `time` and `noecho` run
    the rest of the line the same way. Checked before the lab comes up, from the topology alone."""
    try:
        from ..mininet.cli import LabCLI
    except ImportError:
        return []  # no Mininet: `lab up` cannot run anyway, and says so
    known = {name[3:] for name in dir(LabCLI) if name.startswith("do_")}
    nodes = [h.name for h in topo.hosts] + ["s1"]
    parser = cmd_module.Cmd()
    problems: list[str] = []
    for given in commands:
        line = given.split("#")[0]  # Mininet's precmd: a comment
        while True:
            first, rest, line = parser.parseline(line)
            if not line or first in known and first not in ("time", "noecho"):
                break  # an empty line does nothing; a CLI command runs
            if first in ("time", "noecho"):
                line = rest or ""
                if not line.strip():
                    break  # `time` alone times nothing, as the CLI does
                continue
            if first in nodes:
                if not rest:
                    problems.append(f"--cmd {given!r}: {first!r} needs a command after it (HOST COMMAND)")
                break
            word = first or line.split()[0]
            problems.append(f"--cmd {given!r}: {word!r} is not a host of lab {topo.name!r} or a command of the lab "
                            f"CLI (Mininet would print \"*** Unknown command\" and go on); hosts: "
                            f"{', '.join(h.name for h in topo.hosts)} (switch: s1); commands: `help` lists them")
            break
    return problems


def split_profile(name: str) -> tuple[str, bool]:
    """'hspa+radio' -> ('hspa', True)."""
    if name.endswith("+radio"):
        return name[: -len("+radio")], True
    return name, False


@app.command("list")
def list_topologies() -> None:
    """The topologies in topologies/ with their parameters (exit 1 naming each file that does not
    load; the others are listed)."""
    from ..mininet.topology import TopologyError, load_topology, topology_names
    t = Table("name", "parameters", "description")
    problems = []
    for name in topology_names():
        try:
            spec = load_topology(name)
        except TopologyError as exc:
            problems.append(str(exc))
            continue
        # The description is the file's free text: shown as written, never as Rich markup.
        t.add_row(name, " ".join(f"{k}={v}" for k, v in spec.params.items()) or "-",
                  escape(spec.description))
    console.print(t)
    for problem in problems:
        error(problem)
    if problems:
        raise typer.Exit(EXIT_PROBLEM)


@app.command("show")
def show(topology: str = typer.Argument(..., help="Topology name or YAML file."),
         param: list[str] = typer.Option([], "--param", "-p", help="NAME=N, e.g. servers=4.")) -> None:
    """The hosts a topology expands to: address, switch port, slot (access link) and UE id;
    in a routed topology also each host's router, its own link's slot and the routes."""
    from ..mininet.topology import TopologyError, load_topology, topology_names
    try:
        topo = load_topology(topology).expand(parse_params(param))
    except TopologyError as exc:
        error(str(exc))
        raise typer.Exit(EXIT_PROBLEM)
    routes = topo.routes()
    cols = ["host", "role", "address", "switch port", "slot", "UE id"]
    if routes:
        cols += ["router", "link", "routes"]
    t = Table(*cols, title=topo.name)
    for h in topo.hosts:
        row = [h.name, h.role, h.ip, str(h.port), "-" if h.slot is None else str(h.slot),
               "-" if h.ue is None else str(h.ue)]
        if routes:
            row += [h.router or "-", "-" if h.link is None else str(h.link),
                    ", ".join(f"{p} via {v}" for p, v in routes.get(h.name, [])) or "-"]
        t.add_row(*row)
    console.print(t)


@app.command("up")
def up(
    topology: str = typer.Argument(..., help="Topology name (p4netem lab list) or YAML file."),
    profile: str = typer.Option(None, "--profile", help="Profile for the clients' links "
                                "(built-in name or YAML file); NAME+radio turns the radio on."),
    link_profile: str = typer.Option(None, "--link-profile", help="Routed topologies "
                                     "(dumbbell): profile for every host's own link to its "
                                     "router; --profile is then the bottleneck's."),
    param: list[str] = typer.Option([], "--param", "-p", help="Topology parameter NAME=N."),
    serve: str = typer.Option(None, "--serve", help="Start nginx and SPDY servers with this "
                              "page (demo, microscape, e3-a-2s, e5-site3, uniform-NxS ...)."),
    cmd: list[str] = typer.Option([], "--cmd", help="Run 'HOST COMMAND' (Mininet CLI syntax) "
                                  "instead of the interactive CLI; repeatable."),
    pcap: Path = typer.Option(None, "--pcap", help="Directory for the switch's per-port pcaps."),
    target: str = typer.Option("p4netem", "--target", help="p4netem or bmv2."),
) -> None:
    """Bring a lab up, open the Mininet CLI (or run --cmd), tear it down on exit."""
    from ..mininet.topology import TopologyError, load_topology, topology_names
    try:
        topo = load_topology(topology).expand(parse_params(param))
        prof = None
        if profile:
            name, radio = split_profile(profile)
            prof = (_option_profile("--profile", name), radio)
        link_prof = _option_profile("--link-profile", link_profile) if link_profile else None
        if link_prof is not None and not topo.links:
            raise ValueError(f"--link-profile: topology {topo.name!r} has no host links (only "
                             "routed topologies, such as the dumbbell, have them)")
        run_options.check_target(target)
        if serve:
            from ..web.pages import named
            try:
                named(serve)
            except ValueError as exc:
                raise ValueError(f"--serve: {exc}") from None
        if pcap is not None:
            run_options.check_out_dir(pcap, "--pcap")
    except (TopologyError, ValueError) as exc:
        error(str(exc))
        raise typer.Exit(EXIT_PROBLEM)
    # Mininet's CLI answers an unknown command with "*** Unknown command", goes on and exits 0: a
    # scripted --cmd is checked first, and a bad one is an error before any lab comes up.
    problems = check_commands(cmd, topo)
    for problem in problems:
        error(problem)
    if problems:
        raise typer.Exit(EXIT_PROBLEM)
    # Mininet's CLI polls standard input; a closed one (`<&-`) is an empty one.
    stdin = sys.stdin if sys.stdin is not None else open(os.devnull)
    from p4netem.lab.netns import LabError
    from p4netem.p4rt import P4RuntimeError
    from p4netem_entry import restore_grpc_logs
    from ..mininet.cli import LabCLI
    from ..mininet.lab import MininetLab
    # The hosts' shells run the user's commands with this process's environment: without the
    # GRPC_VERBOSITY=NONE the command line set for itself (before the lab starts any).
    restore_grpc_logs()
    code = 0
    with interrupt_on_termination():
        try:
            with MininetLab(topo, target=target, pcap_dir=pcap, mininet_log="output") as lab, \
                    tempfile.TemporaryDirectory(prefix="p4n-labup-") as work:
                if lab.record is not None:
                    lab.record.add_dir(work)  # removed by `lab clean` if this process is killed
                if prof:
                    rec = lab.apply_profile(prof[0], radio=prof[1])[0]
                    note = f" ({rec.radio.note})" if rec.radio.requested and not rec.radio.applied else ""
                    console.print(f"profile {prof[0].name} on the clients' links{note}")
                if link_prof:
                    lab.apply_link_profile(link_prof)
                    console.print(f"profile {link_prof.name} on every host's own link")
                served = _serve(lab, serve, Path(work)) if serve else None
                try:
                    check_pending()  # a SIGTERM Python dropped while the lab started (cli.signals)
                    _describe(lab, served)
                    if cmd:
                        script = Path(work) / "commands"
                        script.write_text("\n".join(cmd) + "\n")
                        failures = LabCLI(lab, served, script=str(script), stdin=stdin).failures
                        for failure in failures:
                            error(f"--cmd {failure}")
                        if failures:
                            code = EXIT_PROBLEM
                    else:
                        LabCLI(lab, served, stdin=stdin)
                finally:
                    if served:
                        served[0].stop()
        except KeyboardInterrupt:
            err.print("[yellow]interrupted: lab removed[/]")
            code = 130
        except Terminated as exc:
            err.print("[yellow]terminated: lab removed[/]")
            code = exc.code
        except (LabError, OSError, P4RuntimeError) as exc:
            # The lab is removed (MininetLab's close) before this line is printed.
            error(str(exc))
            code = EXIT_PROBLEM
    raise typer.Exit(code)


def _option_profile(option: str, name: str):
    """The profile an option names (built-in or YAML file); its error names the option."""
    from ..harness.plan import resolve_profile
    try:
        return resolve_profile(name)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None


@app.command("clean")
def clean(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Remove the labs (namespaces, links, switches, servers) of runs that were killed outright;
    labs whose owner process still runs are left alone."""
    import json
    import os

    from p4netem.lab.owner import clean_dead_labs, run_dir
    if os.geteuid() != 0:
        error("lab clean needs root (namespaces)")
        raise typer.Exit(EXIT_PROBLEM)
    report = clean_dead_labs()
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.lines():
            console.print(f"removed {line}", highlight=False)
        console.print(f"{len(report.cleaned)} dead lab(s) removed, {len(report.live)} live lab(s) "
                      f"left alone ({run_dir()})", highlight=False)
    raise typer.Exit(1 if any(lab.problems for lab in report.cleaned) else 0)


def _serve(lab, page: str, work: Path):
    from ..harness.endpoints import Endpoints, SiteContent
    content = SiteContent.generate([page], work / "content")
    ep = Endpoints(lab, content, workdir=work / "endpoints").start()
    return ep, page


def _describe(lab, served) -> None:
    t = Table("host", "address", "namespace", "slot", "UE id", title=f"lab {lab.topology.name}")
    for h in lab.topology.hosts:
        t.add_row(h.name, h.ip, lab.ns(h.name), "-" if h.slot is None else str(h.slot),
                  "-" if h.ue is None else str(h.ue))
    console.print(t)
    console.print(f"switch: p4netem gRPC {lab.switch.grpc_addr} (device 1); "
                  "`ip netns exec NAMESPACE ...` works from other shells")
    if served:
        ep, page = served
        names = ep.resolve_map(page)
        console.print(f"serving page {page!r}: " + ", ".join(f"{h} -> {ip}" for h, ip in names.items()))
        first = next(iter(names.items()))
        console.print(f"try: load h2 | load spdy | load h1.1 plain | "
                      f"{lab.topology.clients[0].name} curl -sk --resolve "
                      f"{first[0]}:443:{first[1]} https://{first[0]}/index.html -o /dev/null "
                      "-w '%{http_version} %{time_total}\\n'")
