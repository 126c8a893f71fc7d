"""`p4netem apply` and `p4netem reset`: put profiles on the switch, take them off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..control import ApplyResult, Controller, Rule, load_rules, parse_rule_option
from ..profiles import Profile, load_profiles
from ..profiles.summary import link_summary
from .common import (DEFAULT_ADDR, DeviceId, ElectionId, Json, SwitchAddr, connect, console, guarded,
                     warning)

RuleOpt = Annotated[Optional[list[str]], typer.Option(
    "--rule", "-r", metavar="KEY=VALUE,...",
    help="Which traffic (repeatable): e.g. 'client=10.0.0.1,ue=1' or "
         "'client.switch_port=1,server.switch_port=2,protocol=tcp,server.ports=443'; "
         "'client=10.0.0.0/24,ue=by-address,ue_base=1000' gives each client address its own UE "
         "(1000 + host bits). Default: all traffic between ports 1 (clients) and 2 (servers), UE 0.")]
RulesFile = Annotated[Optional[Path], typer.Option(
    "--rules", metavar="FILE", help="YAML file with a list of rules (or `rules:`), added to --rule.")]
ProfilesOpt = Annotated[Optional[list[Path]], typer.Option(
    "--profiles", "-p", metavar="FILE",
    help="YAML profile file(s) or directories whose profiles can be named (repeatable).")]


def gather_rules(rule: list[str] | None, rules_file: Path | None) -> list[Rule]:
    rules = [parse_rule_option(text) for text in rule or []]
    if rules_file is not None:
        rules += load_rules(rules_file.read_text(encoding="utf-8"), str(rules_file))
    return rules


def gather_profiles(files: list[Path] | None) -> list[Profile]:
    profiles: list[Profile] = []
    for path in files or []:
        profiles += load_profiles(path)
    return profiles


def print_result(result: ApplyResult, as_json: bool) -> None:
    for text in result.warnings:
        warning(text)
    if as_json:
        typer.echo(json.dumps({"added": result.added, "switched": result.switched, "warnings": result.warnings,
                               "flip_ms": round((result.flip_done_ns - result.flip_sent_ns) / 1e6, 3),
                               "rules": [r.to_dict() for r in result.rules]}, indent=2))
        return
    names = sorted({r.label for r in result.rules})
    console.print(f"applied {', '.join(names)} to {len(result.rules)} rule(s): {result.switched} switched, "
                  f"{result.added} added, in force after {(result.flip_done_ns - result.flip_sent_ns) / 1e6:.2f} ms",
                  highlight=False)
    for r in result.rules:
        console.print(f"  #{r.number} {r.rule.describe()}, ue {r.rule.ue_label()}, priority {r.rule.priority}",
                      highlight=False)
        if r.profile is not None:
            console.print(f"     downlink: {link_summary(r.profile.downlink)}", highlight=False)
            console.print(f"     uplink:   {link_summary(r.profile.uplink)}", highlight=False)


@guarded
def apply(
    profile: Annotated[str, typer.Argument(help="A built-in profile (p4netem profiles list), a name from "
                                                "--profiles, or a YAML file with one profile.")],
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Apply a profile to rules (default: all traffic between ports 1 and 2).

    A rule already on the switch (same traffic) switches to the new profile atomically: every packet gets the old or the new profile, never a mix, in both
    directions at once. New rules are added above the existing ones. Everything is validated
    before anything is written: a bad profile or rule changes nothing (exit 1)."""
    rules = gather_rules(rule, rules_file)
    known = gather_profiles(profiles)
    with connect(addr, device_id, election_id, profiles=known) as ctl:
        print_result(ctl.apply(profile, rules or None), as_json)


@guarded
def reset(
    rule: Annotated[Optional[list[str]], typer.Option(
        "--rule", "-r", metavar="KEY=VALUE,...",
        help="Remove only these rules (as given to apply) and their profiles.")] = None,
    port_map: Annotated[bool, typer.Option("--port-map", help="Also delete the port map (no traffic passes).")] = False,
    hard: Annotated[bool, typer.Option("--hard", help="Re-push the pipeline: clears every table, register "
                                                      "and counter, jitter tables and seed included.")] = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Take impairments off (all, or only the given rules).

    Deletes every classifier, profile and radio entry (any controller's), zeroes the counters,
    the shaping state and every UE's radio (IDLE, never seen), and keeps the port map. With
    --rule, removes only those rules and their profiles."""
    rules = [parse_rule_option(text) for text in rule or []]
    with connect(addr, device_id, election_id) as ctl:
        if rules:
            n = ctl.remove(rules)
            console.print(f"removed {n} rule(s)", highlight=False)
        elif hard:
            ctl.push_pipeline(keep_state=False)
            console.print("pipeline re-pushed: every table, register and counter cleared", highlight=False)
        else:
            ctl.reset(port_map=port_map)
            what = ("rules, profiles, counters, UE radios and port map" if port_map
                    else "rules, profiles, counters and UE radios")
            console.print(f"reset: {what} cleared", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("apply")(apply)
    app.command("reset")(reset)


__all__ = ["register", "gather_rules", "gather_profiles", "print_result", "Controller"]
