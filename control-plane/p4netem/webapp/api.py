"""The REST API: profiles (list, show, validate, upload), apply, set, reset, show, stats, radio,
timelines, and self-service shaping. Each endpoint is a thin call of the Controller method the
CLI command of the same name uses; errors keep the controller's field-named messages."""

from __future__ import annotations

import ipaddress
import threading
from typing import Any, Optional

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from ..control import Rule, parse_rule_option
from ..control.timeline import Timeline, TimelineResult
from ..profiles import Profile, ProfileError, loads_profiles
from ..profiles.summary import link_summary
from .auth import Access
from .session import SwitchSession


class _Strict(BaseModel):
    # An unknown field is refused (422), not ignored: `{"rule": [...]}` for `rules` would otherwise
    # apply to, or reset, every rule.
    model_config = ConfigDict(extra="forbid")


class ApplyRequest(_Strict):
    profile: str = Field(description="A built-in profile name or the name of an uploaded one.")
    rules: list[str] = Field(default_factory=list,
                             description="Rules in the CLI's --rule form, e.g. 'client=10.0.0.1,ue=1'; "
                                         "none: all traffic between ports 1 and 2.")
    in_place: bool = Field(False, description="Change the parameters where they are (the queue carries on).")


class SetRequest(_Strict):
    changes: dict[str, Any] = Field(description="Fields to change, as a timeline's set step: "
                                                "{\"downlink.rate\": \"1Mbit\", \"delay\": \"40ms\"}.")
    rules: list[str] = Field(default_factory=list)


class ResetRequest(_Strict):
    rules: list[str] = Field(default_factory=list, description="Remove these rules only; none: reset everything.")
    port_map: bool = False


class YamlText(_Strict):
    yaml: str = Field(description="A YAML document (one profile, or several under `profiles:`).")


class TimelineRequest(_Strict):
    yaml: str = Field(description="A timeline YAML document (docs/control.md).")
    rules: list[str] = Field(default_factory=list)


class SelfRequest(_Strict):
    profile: str = Field(description="A profile of the library to put on the caller's own traffic.")


# The largest YAML document POST /api/profiles/validate reads (it needs no token).
OPEN_YAML_CHARS = 1 << 20


def apply_result(result) -> dict[str, Any]:
    """An ApplyResult as `p4netem apply --json` and `p4netem set --json` print it."""
    return {"added": result.added, "switched": result.switched, "modified_in_place": result.modified,
            "warnings": result.warnings, "flip_ms": round((result.flip_done_ns - result.flip_sent_ns) / 1e6, 3),
            "rules": [a.to_dict() for a in result.rules]}


def _rules(texts: list[str]) -> list[Rule] | None:
    return [parse_rule_option(t) for t in texts] or None


def problems_of(exc: ProfileError) -> list[dict[str, str]]:
    return [{"path": p.path, "message": p.message} for p in exc.problems]


def profile_summary(p: Profile) -> dict[str, Any]:
    return {"name": p.name, "title": p.title, "downlink": link_summary(p.downlink), "uplink": link_summary(p.uplink),
            "radio": p.radio.model, "source": p.source}


def caller_address(request: Request) -> str:
    host = request.client.host if request.client else ""
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise HTTPException(400, f"cannot shape for client address {host!r}") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped  # a dual-stack listener reports IPv4 clients as ::ffff:a.b.c.d
    return str(addr)


class TimelineRunner:
    """At most one timeline at a time, played on its own thread; stop() ends it between steps."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.stop_event = threading.Event()
        self.result: TimelineResult | None = None
        self.error: str | None = None
        self.name: str | None = None

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"running": self.running(), "name": self.name, "error": self.error}
        if self.result is not None:
            out["events"] = len(self.result.events)
            out["stopped"] = self.result.interrupted
        return out


def build_router(session: SwitchSession, access: Access, timelines: TimelineRunner,
                 health: bool = False) -> APIRouter:
    """The /api routes; `health`: /api/health has the switch's own health (--switch-metrics)."""
    operator = Depends(access.require_operator)
    r = APIRouter(prefix="/api")

    @r.get("/profiles", summary="The profile library: built-in and uploaded profiles")
    def list_profiles() -> list[dict[str, Any]]:
        return [profile_summary(p) for _, p in sorted(session.known_profiles().items())]

    @r.get("/profiles/{name}", summary="One profile, every field")
    def show_profile(name: str) -> dict[str, Any]:
        profile = session.known_profiles().get(name)
        if profile is None:
            raise HTTPException(404, f"no profile named {name!r} (GET /api/profiles lists them)")
        return profile.to_dict()

    @r.post("/profiles/validate", summary="Check a profile YAML; every problem with its field path")
    def validate_profiles(body: YamlText) -> dict[str, Any]:
        if len(body.yaml) > OPEN_YAML_CHARS:
            # Open to anyone (no token): a document of many thousand profiles costs minutes of CPU
            # and gigabytes here; a profile library to check fits well within this.
            raise HTTPException(413, f"a document of {len(body.yaml)} characters; this endpoint, open without a "
                                     f"token, reads at most {OPEN_YAML_CHARS}")
        try:
            loaded = loads_profiles(body.yaml, "profile")
        except ProfileError as exc:
            return {"valid": False, "error": str(exc), "problems": problems_of(exc)}
        return {"valid": True, "profiles": [p.name for p in loaded], "problems": []}

    @r.post("/profiles", status_code=201, dependencies=[operator],
            summary="Upload profiles (YAML); they can then be applied by name")
    def upload_profiles(body: YamlText) -> dict[str, Any]:
        loaded = loads_profiles(body.yaml, "profile")  # ProfileError: 422 with the problems
        for p in loaded:
            session.add_profile(p)
        return {"added": [p.name for p in loaded]}

    @r.post("/apply", dependencies=[operator], summary="Apply a profile to rules (p4netem apply)")
    def apply(body: ApplyRequest) -> dict[str, Any]:
        rules = _rules(body.rules)
        return apply_result(session.write(lambda ctl: ctl.apply(body.profile, rules, in_place=body.in_place),
                                          blocking=False))

    @r.post("/set", dependencies=[operator], summary="Change fields of the rules' profiles in place (p4netem set)")
    def set_fields(body: SetRequest) -> dict[str, Any]:
        rules = _rules(body.rules)
        return apply_result(session.write(lambda ctl: ctl.set(body.changes, rules), blocking=False))

    @r.post("/reset", dependencies=[operator], summary="Remove rules, or everything (p4netem reset)")
    def reset(body: ResetRequest) -> dict[str, Any]:
        rules = _rules(body.rules)
        if rules:
            return {"removed": session.write(lambda ctl: ctl.remove(rules), blocking=False)}
        session.write(lambda ctl: ctl.reset(port_map=body.port_map), blocking=False)
        return {"reset": True}

    @r.get("/show", dependencies=[operator], summary="Port map and every rule with its profile (p4netem show)")
    def show() -> dict[str, Any]:
        def read(ctl):
            state = ctl.state()
            return {"switch": session.address, "device_id": session.device_id,
                    "port_map": {str(k): v for k, v in sorted(state.port_map.items())},
                    "rules": [ctl.applied_rule(m, state).to_dict() for m in state.managed.values()],
                    "unmanaged_entries": len(state.unmanaged), "broken_entries": len(state.broken)}
        return session.read(read)

    @r.get("/stats", dependencies=[operator], summary="Counters per rule and direction (p4netem stats --json)")
    def stats() -> dict[str, Any]:
        return session.stats().to_dict()

    @r.get("/radio", dependencies=[operator], summary="Each UE's radio (p4netem radio show --json)")
    def radio() -> dict[str, Any]:
        return session.read(lambda ctl: ctl.radio()).to_dict()

    @r.get("/timelines", dependencies=[operator], summary="The timeline running or last run")
    def timeline_status() -> dict[str, Any]:
        return timelines.status()

    @r.post("/timelines", status_code=202, dependencies=[operator], summary="Start a timeline (p4netem timeline run)")
    def timeline_start(body: TimelineRequest) -> dict[str, Any]:
        if timelines.running():
            raise HTTPException(409, "a timeline is running: DELETE /api/timelines stops it")
        timeline = Timeline.loads(body.yaml, "timeline")  # TimelineError (a ProfileError): 422
        rules = _rules(body.rules)
        # Checked before answering, as the CLI checks before its first change: an unknown profile is
        # invalid input (422), not a 202 whose error only GET /api/timelines shows.
        session.write(lambda ctl: ctl.check_timeline(timeline, rules), blocking=False)
        timelines.stop_event.clear()
        timelines.result, timelines.error, timelines.name = None, None, getattr(timeline, "name", None)

        def play() -> None:
            try:
                timelines.result = session.write(
                    lambda ctl: ctl.run_timeline(timeline, rules, stop=timelines.stop_event), exclusive=True)
            except Exception as exc:  # reported by GET /api/timelines
                timelines.error = str(exc)

        timelines.thread = threading.Thread(target=play, daemon=True, name="p4netem-web-timeline")
        timelines.thread.start()
        return timelines.status()

    @r.delete("/timelines", dependencies=[operator], summary="Stop the running timeline (the last profile stays)")
    def timeline_stop() -> dict[str, Any]:
        timelines.stop_event.set()
        if timelines.thread is not None:
            timelines.thread.join(timeout=10)
        return timelines.status()

    # ---- self-service: the caller's own traffic --------------------------------------------------

    def own_rule(request: Request) -> Rule:
        return Rule.parse({"client": {"ip": caller_address(request)}}, "self-service rule")

    @r.get("/self", summary="The caller's address and the profile its traffic has")
    def self_show(request: Request) -> dict[str, Any]:
        rule = own_rule(request)

        def read(ctl):
            state = ctl.state()
            managed = state.find(rule)
            return ctl.applied_rule(managed, state).to_dict() if managed is not None else None
        operator = access.is_operator(request)
        # "health": whether GET /api/health has something to say to this caller (the page asks it
        # only then: a 404 at each load would be an error in the browser's console).
        return {"address": caller_address(request), "operator": operator, "health": operator and health,
                "rule": session.read(read)}

    @r.put("/self", summary="Shape the caller's own traffic with a profile of the library")
    def self_apply(body: SelfRequest, request: Request) -> dict[str, Any]:
        rule = own_rule(request)
        if body.profile not in session.known_profiles():
            raise HTTPException(404, f"no profile named {body.profile!r} (GET /api/profiles lists them)")
        result = session.write(lambda ctl: ctl.apply(body.profile, [rule]), blocking=False)
        return {"address": caller_address(request), "rules": [a.to_dict() for a in result.rules]}

    @r.delete("/self", summary="Stop shaping the caller's own traffic")
    def self_remove(request: Request) -> dict[str, Any]:
        rule = own_rule(request)

        def remove(ctl) -> int:
            # "Stop shaping" with nothing shaped is no error for the person who pressed it.
            return ctl.remove([rule]) if ctl.state().find(rule) is not None else 0
        return {"address": caller_address(request), "removed": session.write(remove, blocking=False)}

    return r
