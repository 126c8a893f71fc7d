"""`p4netem apply` and `p4netem reset`: put profiles on the switch, take them off."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .common import (DEFAULT_ADDR, DeviceId, ElectionId, Json, SwitchAddr, connect, console, guarded,
                     warning)

# The profiles, rules and controller are imported by the functions that use them (cli.common says why).
if TYPE_CHECKING:
    from ..control import ApplyResult, Controller, Rule
    from ..control.trace import MahimahiTrace
    from ..profiles import Profile
    from ..profiles.mahimahi import MahimahiChain
    from ..profiles.netem import NetemSetup

RuleOpt = Annotated[Optional[list[str]], typer.Option(
    "--rule", "-r", metavar="KEY=VALUE,...",
    help="Which traffic (repeatable): e.g. 'client=10.0.0.1,ue=1' or "
         "'client.switch_port=1,server.switch_port=2,protocol=tcp,server.ports=443'; "
         "'client=10.0.0.0/24,ue=by-address,ue_base=1000' gives each client address its own UE "
         "(1000 + host bits). Default: all traffic between ports 1 (clients) and 2 (servers), UE 0.")]
RulesFile = Annotated[Optional[Path], typer.Option(
    "--rules", metavar="FILE", help="YAML file with a list of rules (or `rules:`), added to --rule.")]
InPlace = Annotated[bool, typer.Option(
    "--in-place", help="Change the parameters of the profile a rule already has where they are (its "
                       "queue, virtual clock and loss state carry on, like `tc qdisc change`) instead "
                       "of switching it to a new, empty queue.")]
ProfilesOpt = Annotated[Optional[list[Path]], typer.Option(
    "--profiles", "-p", metavar="FILE",
    help="YAML profile file(s) or directories whose profiles can be named (repeatable); a timeline "
         "file gives the profiles it defines (its `profiles:` and the files its steps apply).")]


def gather_rules(rule: list[str] | None, rules_file: Path | None) -> list[Rule]:
    from ..control.rules import RuleError, load_rules, parse_rule_option
    from ..profiles.errors import Problem
    from ..safe_yaml import YamlInputError, read_text

    rules = [parse_rule_option(text) for text in rule or []]
    if rules_file is not None:
        try:
            text = read_text(rules_file)
        except YamlInputError as exc:
            raise RuleError([Problem(exc.where, exc.message)], str(rules_file)) from None
        except UnicodeDecodeError as exc:
            raise RuleError([Problem("", f"not UTF-8 text: {exc.reason}")], str(rules_file)) from None
        rules += load_rules(text, str(rules_file))
    return rules


def gather_profiles(files: list[Path] | None) -> list[Profile]:
    """The profiles of --profiles: profile files, directories of them, and timeline files (whose
    inline `profiles:` and applied profile files count; their problems name the timeline's field)."""
    if not files:
        return []
    from ..control.timeline import Timeline
    from ..profiles.yaml_files import load_profiles

    profiles: list[Profile] = []
    for path in files or []:
        if _is_timeline(path):
            profiles += Timeline.load(path).own_profiles()
        else:
            profiles += load_profiles(path)
    return profiles


def _is_timeline(path: Path) -> bool:
    """A file whose YAML is a mapping with `steps:` (a timeline; no profile has that key). A file
    that cannot be read or parsed is left to the profile loader, which names the problem."""
    from .. import safe_yaml
    from ..safe_yaml import YamlInputError

    if path.is_dir():
        return False
    try:
        data = safe_yaml.load_file(path)
    except (YamlInputError, OSError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and "steps" in data


def print_result(result: ApplyResult, as_json: bool) -> None:
    from ..profiles.summary import link_summary

    for text in result.warnings:
        warning(text)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    names = sorted({r.label for r in result.rules})
    how = [f"{result.switched} switched"] if result.switched or not result.modified else []
    how += [f"{result.modified} changed in place"] if result.modified else []
    console.print(f"applied {', '.join(names)} to {len(result.rules)} rule(s): {', '.join(how)}, "
                  f"{result.added} added, in force after {(result.flip_done_ns - result.flip_sent_ns) / 1e6:.2f} ms",
                  highlight=False)
    for r in result.rules:
        console.print(f"  #{r.number} {r.rule.describe()}, ue {r.rule.ue_label()}, priority {r.rule.priority}",
                      highlight=False)
        if r.profile is not None:
            console.print(f"     downlink: {link_summary(r.profile.downlink)}", highlight=False)
            console.print(f"     uplink:   {link_summary(r.profile.uplink)}", highlight=False)


NetemOpt = Annotated[Optional[str], typer.Option(
    "--netem", metavar="'OPTIONS'",
    help="netem options instead of PROFILE, for both directions, as tc takes them: "
         "--netem 'delay 100ms 10ms distribution normal loss 1% rate 1mbit limit 1000' "
         "(docs/profiles.md, From netem). `distribution FILE.dist` loads that netem table into the "
         "switch's user table (jitter_distribution: user).")]
NetemUplinkOpt = Annotated[Optional[str], typer.Option(
    "--netem-uplink", metavar="'OPTIONS'", help="netem options of the uplink (client to server), replacing --netem there.")]
NetemDownlinkOpt = Annotated[Optional[str], typer.Option(
    "--netem-downlink", metavar="'OPTIONS'",
    help="netem options of the downlink (server to client), replacing --netem there.")]
NetemNameOpt = Annotated[Optional[str], typer.Option(
    "--name", metavar="NAME", help="Name of the profile made from netem options (default netem) or from "
                                   "--mahimahi (default mahimahi).")]
MahimahiOpt = Annotated[Optional[str], typer.Option(
    "--mahimahi", metavar="'COMMAND'",
    help="A Mahimahi shell chain instead of PROFILE, quoted: --mahimahi 'mm-delay 20 mm-loss uplink 0.01 "
         "mm-link up.trace down.trace --downlink-queue=droptail --downlink-queue-args=packets=100' "
         "(docs/profiles.md, From Mahimahi). mm-link's traces are loaded into the switch and played exactly "
         "in the data plane, as `p4netem trace load`.")]


def netem_profile(netem: str | None, uplink: str | None, downlink: str | None, name: str) -> NetemSetup:
    """The profile of --netem/--netem-uplink/--netem-downlink (and the table of a `distribution
    FILE`, for the switch's user slot); warnings printed."""
    from ..profiles.netem import netem_setup

    setup = netem_setup(netem, uplink=uplink, downlink=downlink, name=name)
    for text in setup.warnings:
        warning(text)
    return setup


def mahimahi_setup(command: str, name: str) -> tuple["MahimahiChain", dict[str, "MahimahiTrace"], Profile]:
    """The chain of --mahimahi (warnings printed), its trace files read, and its profile checked
    with the traces' sizes (at cells 0: where the switch puts them is known once they are loaded).
    A bad chain, value or trace file raises ProfileError before anything is written."""
    from ..control.trace import load_trace
    from ..profiles.errors import Problem, ProfileError
    from ..profiles.link import TracePlacement
    from ..profiles.mahimahi import parse_mahimahi

    chain = parse_mahimahi(command, name=name)
    traces = {}
    for direction, path in chain.traces.items():
        try:
            traces[direction] = load_trace(path)
        except OSError as exc:
            raise ProfileError([Problem(f"mm-link {direction} trace {path}", f"cannot read it: {exc.strerror or exc}")],
                               "mahimahi command") from None
    profile = chain.profile({d: TracePlacement(opportunities=len(t.opportunities_ms), period=t.period_ms)
                             for d, t in traces.items()})
    for text in chain.warnings:
        warning(text)
    return chain, traces, profile


@guarded
def apply(
    profile: Annotated[Optional[str], typer.Argument(
        help="A built-in profile (p4netem profiles list), a name from --profiles, or a YAML file with "
             "one profile. Or none, with --netem or --mahimahi.")] = None,
    netem: NetemOpt = None,
    netem_uplink: NetemUplinkOpt = None,
    netem_downlink: NetemDownlinkOpt = None,
    mahimahi: MahimahiOpt = None,
    name: NetemNameOpt = None,
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    in_place: InPlace = False,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Apply a profile to rules (default: all traffic between ports 1 and 2).

    A rule already on the switch (same traffic) switches to the new profile atomically: every
    packet gets the old or the new profile, never a mix, in both directions at once. By default
    it switches to a new, empty queue (the old one drains next to it); --in-place changes the
    parameters of the queue it has, like `tc qdisc change`. New rules are added above the
    existing ones. Everything is validated before anything is written: a bad profile or rule
    changes nothing (exit 1)."""
    plan = plan_apply(profile, netem=netem, netem_uplink=netem_uplink, netem_downlink=netem_downlink,
                      mahimahi=mahimahi, name=name, rule=rule, rules_file=rules_file, profiles=profiles)
    with connect(addr, device_id, election_id, profiles=plan.known) as ctl:
        write_apply(ctl, plan, in_place=in_place, as_json=as_json)


@dataclass
class ApplyPlan:
    """An `apply` validated and ready to write: its profile, rules and --profiles, and what must
    reach the switch before the profile (a netem `distribution FILE` table, mm-link traces)."""

    profile: Profile
    rules: list[Rule]
    known: list[Profile]
    setup: NetemSetup | None = None
    chain: "MahimahiChain | None" = None
    traces: dict[str, "MahimahiTrace"] = field(default_factory=dict)


def plan_apply(profile: str | None, *, netem: str | None = None, netem_uplink: str | None = None,
               netem_downlink: str | None = None, mahimahi: str | None = None, name: str | None = None,
               rule: list[str] | None = None, rules_file: Path | None = None,
               profiles: list[Path] | None = None) -> ApplyPlan:
    """Everything `apply` takes, read and checked without the switch (`apply`, and `switch
    --apply` before it starts the switch): a bad profile, rule or file raises ProfileError (exit 1),
    no or several profile sources typer.BadParameter (exit 2)."""
    from ..control.catalog import resolve_profile
    from ..profiles.library import builtin_profiles

    from_netem = netem is not None or netem_uplink is not None or netem_downlink is not None
    given = [what for what, on in (("PROFILE", profile is not None), ("netem options", from_netem),
                                   ("--mahimahi", mahimahi is not None)) if on]
    if len(given) != 1:
        raise typer.BadParameter(f"give one of PROFILE, netem options (--netem, --netem-uplink, --netem-downlink) "
                                 f"or --mahimahi 'COMMAND', not {' and '.join(given)}" if given else
                                 "give a PROFILE, --netem 'OPTIONS' or --mahimahi 'COMMAND'", param_hint="PROFILE")
    setup = netem_profile(netem, netem_uplink, netem_downlink, name or "netem") if from_netem else None
    chain, traces, checked = mahimahi_setup(mahimahi, name or "mahimahi") if mahimahi is not None else (None, {}, None)
    chosen: Profile | str | None = setup.profile if setup is not None else checked if checked is not None else profile
    rules = gather_rules(rule, rules_file)
    known = gather_profiles(profiles)
    if isinstance(chosen, str):
        # Read before the switch is reached: a bad profile file is exit 1 whatever the switch's state.
        chosen = resolve_profile(chosen, {**builtin_profiles(), **{p.name: p for p in known}})
    assert chosen is not None
    return ApplyPlan(chosen, rules, known, setup, chain, traces)


def write_apply(ctl: Controller, plan: ApplyPlan, *, in_place: bool = False, as_json: bool = False) -> ApplyResult:
    """Write a plan to the switch (tables and traces first, then the profile in one atomic write)
    and print the result."""
    chosen = plan.profile
    if plan.setup is not None and plan.setup.user_table is not None:
        # `distribution FILE`: the table goes into the user slot before the profile that
        # draws from it, so its first packet already gets the file's distribution.
        ctl.load_distribution(plan.setup.user_table)
        if not as_json:
            console.print(f"loaded the user distribution table: {plan.setup.user_table.describe()}", highlight=False)
    if plan.chain is not None:
        chosen = load_mahimahi_traces(ctl, plan.chain, plan.traces, quiet=as_json)
    result = ctl.apply(chosen, plan.rules or None, in_place=in_place)
    print_result(result, as_json)
    return result


def load_mahimahi_traces(ctl: Controller, chain: "MahimahiChain", traces: dict[str, "MahimahiTrace"],
                         quiet: bool = False) -> Profile:
    """mm-link's traces written into free trace cells (as `p4netem trace load`), and the chain's
    profile with each traced direction's placement, ready to apply."""
    placed = ctl.load_traces(traces)
    if not quiet:
        for direction, where in placed.items():
            console.print(f"loaded the {direction} trace {traces[direction].source}: {where.opportunities} "
                          f"opportunities over {where.period} ms, in the data plane at cells {where.cells}",
                          highlight=False)
    return chain.profile(placed)


@guarded
def set_fields(
    changes: Annotated[list[str], typer.Argument(
        metavar="FIELD=VALUE...",
        help="Profile fields to change, as a timeline's `set`: downlink.rate=1Mbit, delay=40ms (both "
             "directions), uplink.loss=2%, downlink.queue.packets=100, radio.promotion=1s (an LTE radio's field); "
             "FIELD= (empty) puts the field back to its default.")],
    rule: RuleOpt = None,
    rules_file: RulesFile = None,
    profiles: ProfilesOpt = None,
    switch_queue: Annotated[bool, typer.Option(
        "--switch-queue", help="Switch to the rule's spare profile id (a new, empty queue) instead of "
                               "changing the parameters in place.")] = False,
    as_json: Json = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Change fields of the profile the rules have on the switch (default rule: all traffic
    between ports 1 and 2), in place: `p4netem set downlink.rate=1Mbit delay=40ms`.

    Like `tc qdisc change`: the rule's queue, its virtual clock, the delay line's release order
    and the Gilbert-Elliott loss state carry on at the new parameters, in one atomic write (both
    directions at once). Every rule must already have a profile (p4netem apply). Invalid fields
    or values change nothing (exit 1) and name the field and the allowed range."""
    parsed = parse_assignments(changes)
    rules = gather_rules(rule, rules_file)
    known = gather_profiles(profiles)
    with connect(addr, device_id, election_id, profiles=known) as ctl:
        print_result(ctl.set(parsed, rules or None, in_place=not switch_queue), as_json)


def parse_assignments(items: list[str]) -> dict[str, object]:
    """["downlink.rate=1Mbit", "delay="] -> {"downlink.rate": "1Mbit", "delay": None}."""
    from .. import safe_yaml
    from ..profiles.errors import Problem, ProfileError
    from ..safe_yaml import YamlInputError

    out: dict[str, object] = {}
    problems = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(item, "expected FIELD=VALUE, e.g. downlink.rate=1Mbit or delay=40ms"))
            continue
        value = value.strip()
        if value[:1] in "{[":
            try:
                out[key.strip()] = safe_yaml.load(value)
            except YamlInputError as exc:
                problems.append(Problem(key.strip(), exc.message))
            continue
        out[key.strip()] = None if value == "" else value
    if problems:
        raise ProfileError(problems)
    return out


@guarded
def reset(
    rule: Annotated[Optional[list[str]], typer.Option(
        "--rule", "-r", metavar="KEY=VALUE,...",
        help="Remove only these rules (as given to apply) and their profiles.")] = None,
    port_map: Annotated[bool, typer.Option(
        "--port-map", help="Also delete the port map and L2 entries (no traffic passes until `p4netem port-map`).")] = False,
    hard: Annotated[bool, typer.Option("--hard", help="Re-push the pipeline: clears every table, register "
                                                      "and counter, jitter tables and seed included; the "
                                                      "forwarding is written back unless --port-map.")] = False,
    addr: SwitchAddr = DEFAULT_ADDR,
    device_id: DeviceId = 1,
    election_id: ElectionId = 1,
) -> None:
    """Take impairments off (all, or only the given rules).

    Deletes every classifier, profile and radio entry (any controller's), zeroes the counters,
    the shaping state and every UE's radio (IDLE, never seen), and keeps the port map. With
    --rule, removes only those rules and their profiles."""
    from ..control.rules import parse_rule_option

    rules = [parse_rule_option(text) for text in rule or []]
    with connect(addr, device_id, election_id) as ctl:
        if rules:
            n = ctl.remove(rules)
            console.print(f"removed {n} rule(s)", highlight=False)
        elif hard:
            ctl.reset_hard(port_map=port_map)
            console.print("pipeline re-pushed: every table, register and counter cleared"
                          + (", port map included (nothing is forwarded)" if port_map
                             else "; port map and L2 forwarding written back"), highlight=False)
        else:
            ctl.reset(port_map=port_map)
            what = ("rules, profiles, counters, UE radios and port map" if port_map
                    else "rules, profiles, counters and UE radios")
            console.print(f"reset: {what} cleared", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("apply")(apply)
    app.command("set")(set_fields)
    app.command("reset")(reset)


__all__ = ["register", "gather_rules", "gather_profiles", "print_result", "plan_apply", "write_apply", "ApplyPlan"]
