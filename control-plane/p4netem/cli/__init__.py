"""The `p4netem` command line (typer). One module per command group; this module only assembles
them, so each group's options and help live next to the code they drive.

Commands: switch, apply, set, reset, port-map, show, stats, web, replay, host-check, radio (show,
watch), distribution (load, show, make), timeline (run, check), trace (run, check, load), profiles
(list, show, validate, from-netem, from-mahimahi); with the studies package installed (studies/, package
p4netem_studies), also lab (Mininet labs), measure (page loads; docs/labs.md) and experiment (the
studies E1-E5; docs/experiments.md), which join through the entry-point group `p4netem.commands`:
the control plane never imports the studies. Every command
that talks to a switch takes --switch HOST:PORT (env P4NETEM_ADDR, default 127.0.0.1:9559),
--device-id and --election-id; the TLS options --grpc-ca, --grpc-cert, --grpc-key (env
P4NETEM_GRPC_CA, ...) and --primary-wait (how long a command that writes waits for the primary
role another live controller holds, env P4NETEM_PRIMARY_WAIT) come before the command and hold
for all of them. docs/cli.md shows each with its output.

Exit codes a script can rely on (every command):
  0    done
  1    the command ran and found a problem: an invalid profile, rule or timeline (nothing was
       written to the switch), a check that did not pass (timeline --max-error, host-check
       --max-stall-ms, replay --expect), or the switch process failed (`p4netem switch`)
  2    bad usage (unknown option, missing argument: typer/click's own code)
  3    the switch could not be reached or refused the request (not primary, bad request); the
       message carries the gRPC status name, e.g. `error: switch 127.0.0.1:9559: UNAVAILABLE: ...`
  130  a timeline was interrupted with Ctrl-C (the switch keeps the last profile applied)
       or any command while it starts (p4netem_entry: no traceback)

Errors are printed on stderr, first line starting with `error:`; warnings with `warning:`.
`--json` (apply, set, show, stats, replay, host-check, radio show, distribution load/show, timeline
run, trace run/load; lab clean and experiment status too) prints machine-readable output on stdout;
`radio watch --json` one JSON object per line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..control.primary_wait import CLI_WAIT_S
from .common import (EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEM, EXIT_SWITCH, EXIT_USAGE, GrpcCa, GrpcCert, GrpcKey,
                     GrpcServerName, PrimaryWait, use_primary_wait, use_tls)
from .lazy_group import LazyCommands, LazyGroup

# The commands and the module that registers each (its `register(app)`, or its `app` as the group of
# that name), in the order `p4netem --help` lists them. A command runs after importing its module
# only (lazy_group.py says why); tests/unit/test_cli_startup.py checks this table against the
# modules' registrations.
COMMANDS = {
    "switch": "switch_cmd", "apply": "apply_cmd", "set": "apply_cmd", "reset": "apply_cmd",
    "port-map": "forward_cmd", "show": "show_cmd", "stats": "show_cmd", "web": "web_cmd",
    "replay": "replay_cmd", "host-check": "host_cmd",
    "radio": "radio_cmd", "distribution": "distribution_cmd", "timeline": "timeline_cmd",
    "trace": "trace_cmd", "profiles": "profiles_cmd",
}
GROUPS = frozenset({"radio", "distribution", "timeline", "trace", "profiles"})

# Command groups of other installed packages (the studies: lab, measure, experiment). Each entry
# point is a function taking the app; they are looked up only for a command that is not one of
# COMMANDS, or to list them all.
COMMANDS_GROUP = "p4netem.commands"


def register_other_commands(app: typer.Typer) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=COMMANDS_GROUP):
        ep.load()(app)


class _Commands(LazyGroup):
    @staticmethod
    def lazy_commands() -> LazyCommands:
        # Each module registers on an app of its own, with the root's defaults (rich markup mode,
        # options metavar, pretty exceptions), which typer gives the commands it builds.
        return LazyCommands(__name__, COMMANDS, GROUPS, register_other_commands,
                            lambda: typer.Typer(add_completion=False))


app = typer.Typer(
    name="p4netem",
    help="p4netem: a P4-programmable network emulator. Profiles, switch control, labs.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=_Commands,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from ..paths import switch_binary
        print(f"p4netem {version('p4netem')} (switch binary: {switch_binary()})")
        raise typer.Exit()


@app.callback()
def _global_options(grpc_ca: GrpcCa = None, grpc_cert: GrpcCert = None, grpc_key: GrpcKey = None,
                    grpc_server_name: GrpcServerName = None,
                    primary_wait: PrimaryWait = CLI_WAIT_S,
                    version: Annotated[bool, typer.Option(
                        "--version", "-V", is_eager=True, callback=_print_version,
                        help="Print the version of p4netem and the switch binary it runs, then exit.")] = False,
                    ) -> None:
    """p4netem: a P4-programmable network emulator. Profiles, switch control, labs.

    A switch on another machine speaks P4Runtime over TLS: give --grpc-ca (and --grpc-cert,
    --grpc-key under mutual TLS) before the command, e.g. `p4netem --grpc-ca ca.pem show -s sw:9559`,
    or set P4NETEM_GRPC_CA, P4NETEM_GRPC_CERT, P4NETEM_GRPC_KEY."""
    use_tls(grpc_ca, grpc_cert, grpc_key, grpc_server_name)
    use_primary_wait(primary_wait)


__all__ = ["app", "main", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "EXIT_SWITCH", "EXIT_INTERRUPTED"]


def main() -> None:
    app()
