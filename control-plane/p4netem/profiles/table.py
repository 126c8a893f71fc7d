"""LinkParams <-> the `set_impairment` action params of the pipeline contract.

Quantisation (the only places where the table holds less than the profile):
  durations      delay_ns, jitter_ns: whole nanoseconds, exact both ways.
  probabilities  p_table = round_half_up(percent / 100 * 2^32), 100% -> 0xFFFFFFFF ("always").
                 Step 2^-32 (about 2.3e-8 %); a non-zero percent that would become 0 is refused
                 at validation. Read back as the shortest decimal percent with that encoding.
                 netem's correlations (delay_corr, loss_corr, dup_corr, corrupt_corr,
                 reorder_corr) are encoded the same way: they are netem's rho.
  rate           ns_per_byte_q16 = round_half_up(8e9 * 65536 / bit_per_s), 0 = unlimited.
                 Relative step 1/q: 1.9e-12 at 1 kbit/s, 1.9e-6 at 1 Gbit/s, 1.9e-4 at 100 Gbit/s.
                 Read back as the shortest decimal rate with that encoding.
  sizes, counts  overhead_bytes, cell_bytes, cell_overhead_bytes, queue_limit_*, reorder_gap:
                 integers, exact (reorder_gap is 0 when reorder_prob is 0, and read back as gap 1).
                 overhead_bytes and cell_overhead_bytes are signed, -32768..32767, as the bit<16>'s
                 two's complement (value & 0xFFFF; read back 32768..65535 as value - 65536).
  flags          ecn, red_gentle, loss_ecn: 0/1, exact.
  PIE gains      pie_alpha, pie_beta = floor(gain_hz * 2^56 / 10^9), computed exactly (pie.py). Read
                 back as the decimal with the fewest significant digits that encodes to the same
                 integer (0.125 and 1.25, tc-pie's defaults, read back as written).
  on/off link    onoff_on_prob = round_half_up(mean_on * 2^32 / (mean_on + mean_off)), onoff_recip =
                 round(2^64 / (tau ln 2)), tau = mean_on * mean_off / (mean_on + mean_off) ns,
                 computed exactly (onoff.py). Read back as the pair of means with the fewest significant digits
                 that encodes to the same two params.
  derived        trace_period_recip, jitter_mod_recip, cell_recip, red_span_bytes: computed from
                 the other fields for the data plane (which has no run-time division); not read back.
So decode(encode(x)) == x for every value written with no more digits than its quantisation
step allows (all built-in profiles), and encode(decode(t)) == t for every table value a valid
profile can produce. Comparing two profiles by their encodings (`same_table_params`) is exact.
"""

from __future__ import annotations

import functools
import math

from enum import IntEnum
from typing import Any, Mapping

from pydantic import ValidationError

from .. import pipeline as pl
from .. import schema
from .action_params import ParamWidths
from .errors import Problem, ProfileError, problems_from_validation_error
from .link import AqmKind, BearerScheduler, JitterDistribution, LinkParams, pf_halflife_log2
from .onoff import decode_onoff, encode_onoff
from .pie import PIE_ALPHA_MIN, decode_gain, encode_gain
from .units import (ByteSize, Duration, ns_per_byte_q16_to_rate, percent_to_prob, prob_to_percent,
                    rate_to_ns_per_byte_q16)

__all__ = ["SET_IMPAIRMENT", "PROFILE_TABLE", "IMPAIRMENT_PARAMS", "Direction", "encode_link",
           "decode_link", "same_table_params"]

PROFILE_TABLE = pl.PROFILE
SET_IMPAIRMENT = pl.SET_IMPAIRMENT


# IMPAIRMENT_PARAMS, (param id, name, bit width) of set_impairment in contract order: read from the
# contract P4Info (p4netem.schema), never written out here; when first used (module __getattr__),
# as parsing the P4Info is not needed to import, list or validate profiles.
@functools.cache
def _impairment_params() -> tuple[tuple[int, str, int], ...]:
    return schema.action_params(SET_IMPAIRMENT)


@functools.cache
def _params() -> ParamWidths:
    return ParamWidths(SET_IMPAIRMENT, _impairment_params())


def __getattr__(name: str) -> Any:
    if name == "IMPAIRMENT_PARAMS":
        return _impairment_params()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


REORDER_KEEP_ORDER = 0  # release = max(release, last_release)
REORDER_ALLOW = 1  # jitter may reorder


class Direction(IntEnum):
    """The contract's `direction` bit: 0 uplink (client to server), 1 downlink."""

    UPLINK = pl.UPLINK
    DOWNLINK = pl.DOWNLINK

    @property
    def field(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, raw: Any) -> "Direction":
        if isinstance(raw, cls):
            return raw
        if isinstance(raw, str) and raw.strip().upper() in cls.__members__:
            return cls[raw.strip().upper()]
        if isinstance(raw, int) and not isinstance(raw, bool) and raw in (0, 1):
            return cls(raw)
        raise ValueError(f"{raw!r} is not a direction; allowed uplink (0) or downlink (1)")


# Reading the switch decodes every rule's profile (show, stats, the dashboard's refresh, /metrics):
# with 1000 rules the exact-fraction unit conversions took most of a 20 s stats() read. Rules share
# few distinct parameter sets, and LinkParams is frozen, so both directions of the conversion are
# memoized (bounded; a copy of the dict is returned so callers may change it).
_CACHE_SIZE = 4096


def encode_link(link: LinkParams) -> dict[str, int]:
    """set_impairment params (name -> unsigned int) for one direction, in param-id order."""
    try:
        return dict(_encode_link_cached(link))
    except TypeError:  # an unhashable value somewhere: convert without the cache
        return _encode_link(link)


def decode_link(params: Mapping[str, Any]) -> LinkParams:
    """The LinkParams that set_impairment `params` (name -> int or big-endian bytes) mean.

    Every param of the contract must be present. Checks that only guard against settings that
    do nothing are skipped (lenient), since a switch may hold whatever a client wrote; Gilbert-
    Elliott parameters are dropped when ge_p is 0 (the model is off and ignores them).
    """
    try:
        key = tuple(sorted(params.items()))
        return _decode_link_cached(key)
    except TypeError:
        return _decode_link(params)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _encode_link_cached(link: LinkParams) -> dict[str, int]:
    return _encode_link(link)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _decode_link_cached(key: tuple) -> LinkParams:
    return _decode_link(dict(key))


def _encode_link(link: LinkParams) -> dict[str, int]:
    ge = link.gilbert_elliott
    params = {
        "delay_ns": int(link.delay),
        "jitter_ns": int(link.jitter),
        "jitter_dist": link.jitter_distribution.code,
        "reorder_mode": REORDER_KEEP_ORDER if link.reorder.keep_order else REORDER_ALLOW,
        "reorder_prob": percent_to_prob(link.reorder.probability),
        "loss_prob": percent_to_prob(link.loss),
        "ge_p": percent_to_prob(ge.p) if ge else 0,
        "ge_r": percent_to_prob(ge.r) if ge else 0,
        "ge_loss_good": percent_to_prob(ge.loss_good) if ge else 0,
        "ge_loss_bad": percent_to_prob(ge.loss_bad) if ge else 0,
        "ns_per_byte_q16": rate_to_ns_per_byte_q16(link.rate),
        "overhead_bytes": _to_s16(link.overhead),
        "queue_limit_bytes": int(link.queue.bytes),
        "queue_limit_pkts": int(link.queue.packets),
        "dup_prob": percent_to_prob(link.duplicate),
        "corrupt_prob": percent_to_prob(link.corrupt),
        # Tail drop writes zeros: its CoDel times mean nothing, and zeros keep old encodings.
        "aqm": link.aqm.kind.code,
        "codel_target_ns": int(link.aqm.target) if link.aqm.kind is AqmKind.CODEL else 0,
        "codel_interval_ns": int(link.aqm.interval) if link.aqm.kind is AqmKind.CODEL else 0,
        "ecn": int(link.aqm.ecn),
        **_encode_red(link, rate_to_ns_per_byte_q16(link.rate)),
        **_encode_loss_state(link),
        **_encode_slot(link),
        **_encode_trace(link),
        **_encode_bearers(link),
        **_encode_correlation(link),
        "loss_ecn": int(link.loss_ecn),
        **_encode_cells(link),
        **_encode_onoff(link),
        **_encode_pie(link),
    }
    _params().check_encoded(params)
    return params


def _decode_link(params: Mapping[str, Any]) -> LinkParams:
    problems: list[Problem] = []
    values = _params().decode(params, problems)
    if problems:
        raise ProfileError(problems, SET_IMPAIRMENT)

    if values["jitter_dist"] > 5:
        problems.append(Problem("jitter_dist", f"{values['jitter_dist']} is not a distribution "
                                "code; allowed 0..5"))
    if values["slot_dist"] > 5:
        problems.append(Problem("slot_dist", f"{values['slot_dist']} is not a slot distribution code; "
                                "allowed 0 (min/max) or 1..5 (uniform, normal, pareto, paretonormal, user)"))
    if values["reorder_mode"] not in (REORDER_KEEP_ORDER, REORDER_ALLOW):
        problems.append(Problem("reorder_mode", f"{values['reorder_mode']} out of range 0..1"))
    onoff = _decode_onoff(values, problems)
    if problems:
        raise ProfileError(problems, SET_IMPAIRMENT)

    ge = None
    if values["ge_p"]:
        ge = {"p": prob_to_percent(values["ge_p"]), "r": prob_to_percent(values["ge_r"]),
              "loss_good": prob_to_percent(values["ge_loss_good"]),
              "loss_bad": prob_to_percent(values["ge_loss_bad"])}
    data = {
        "delay": Duration(values["delay_ns"]),
        "jitter": Duration(values["jitter_ns"]),
        "jitter_distribution": JitterDistribution.from_code(values["jitter_dist"]),
        "reorder": {"keep_order": values["reorder_mode"] == REORDER_KEEP_ORDER,
                    "probability": prob_to_percent(values["reorder_prob"]),
                    # The data plane treats 0 as 1 (every packet may skip the line).
                    "gap": max(values["reorder_gap"], 1)},
        "rate": ns_per_byte_q16_to_rate(values["ns_per_byte_q16"]),
        "overhead": _from_s16(values["overhead_bytes"]),
        "cell_size": values["cell_bytes"],
        "cell_overhead": _from_s16(values["cell_overhead_bytes"]),
        "queue": {"packets": values["queue_limit_pkts"], "bytes": values["queue_limit_bytes"]},
        "loss": prob_to_percent(values["loss_prob"]),
        "gilbert_elliott": ge,
        "loss_state": _decode_loss_state(values),
        "loss_ecn": bool(values["loss_ecn"]),
        "onoff": onoff,
        "slot": _decode_slot(values),
        "trace": _decode_trace(values),
        "duplicate": prob_to_percent(values["dup_prob"]),
        "corrupt": prob_to_percent(values["corrupt_prob"]),
        "aqm": _decode_aqm(values),
        "bearers": _decode_bearers(values),
        "correlation": {field: prob_to_percent(values[param]) for field, param in _CORRELATION.items()},
    }
    try:
        return LinkParams.model_validate(data, context={"lenient": True})
    except ValidationError as exc:
        # A value the encoding can hold but a profile cannot (e.g. a rate above 100 Gbit/s).
        raise ProfileError(_to_param_names(problems_from_validation_error(exc), values["aqm"]),
                           SET_IMPAIRMENT) from None


def _encode_cells(link: LinkParams) -> dict[str, int]:
    cell = int(link.cell_size)
    return {
        "cell_bytes": cell,
        "cell_overhead_bytes": _to_s16(link.cell_overhead),
        # The data plane counts cells, ceil(wire / cell_bytes), as (wire * cell_recip) >> 32 plus at
        # most two corrections (p4src/include/rate.p4 service_ns; tests/unit/test_cell_profiles.py).
        "cell_recip": 2**32 // cell if cell else 0,
    }


def _to_s16(value: int) -> int:
    """A signed byte count (the overheads, -32768..32767) as the bit<16> the data plane reads as
    two's complement: P4Runtime carries unsigned values only."""
    return int(value) & 0xFFFF


def _from_s16(raw: int) -> int:
    """The inverse of _to_s16 for a bit<16> read back (already checked to be 0..65535)."""
    return raw - 0x10000 if raw >= 0x8000 else raw


def _encode_onoff(link: LinkParams) -> dict[str, int]:
    if link.onoff is None:
        return {"onoff_on_prob": 0, "onoff_recip": 0}
    on_prob, recip = encode_onoff(int(link.onoff.mean_on), int(link.onoff.mean_off))
    return {"onoff_on_prob": on_prob, "onoff_recip": recip}


def _decode_onoff(values: Mapping[str, int], problems: list[Problem]) -> dict[str, Any] | None:
    # The data plane runs the on/off link when onoff_recip is non-zero.
    if not values["onoff_recip"]:
        return None
    try:
        mean_on, mean_off = decode_onoff(values["onoff_on_prob"], values["onoff_recip"])
    except ValueError as exc:
        problems.append(Problem("onoff_on_prob", str(exc)))
        return None
    return {"mean_on": mean_on, "mean_off": mean_off}


_RED_ZERO = {"red_min_bytes": 0, "red_max_bytes": 0, "red_max_prob": 0, "red_wlog": 0,
             "red_span_bytes": 0, "red_gentle": 0, "red_idle_q48": 0}
_Q48_MAX = 2**48 - 1


def _red_idle_unit(wlog: int, q16: int) -> float:
    """red_idle_q48 * avpkt: halvings of the average per 1024 ns of idle link, times 2^48, for a
    one-byte average packet. An idle link of m average-packet times decays the average by (1 - W)^m,
    i.e. by m log2(1/(1-W)) halvings; one average packet takes avpkt * q16 / 2^16 ns."""
    halvings_per_packet = -math.log2(1 - 2.0**-wlog)
    return 2.0**48 * 1024 * 65536 * halvings_per_packet / q16


def _encode_red(link: LinkParams, q16: int) -> dict[str, int]:
    aqm = link.aqm
    if aqm.kind is not AqmKind.RED or q16 == 0:
        return dict(_RED_ZERO)  # other kinds write zeros, so old encodings stay as they were
    prob = percent_to_prob(aqm.probability)
    return {
        "red_min_bytes": int(aqm.min),
        "red_max_bytes": int(aqm.max),
        "red_max_prob": prob,
        "red_wlog": int(aqm.wlog),
        # (max - min) / max_p with max_p the quantised probability the data plane uses.
        "red_span_bytes": min((int(aqm.max) - int(aqm.min)) * 2**32 // max(prob, 1), 2**32 - 1),
        "red_gentle": int(bool(aqm.gentle)),
        "red_idle_q48": min(max(round(_red_idle_unit(int(aqm.wlog), q16) / int(aqm.avpkt)), 1), _Q48_MAX),
    }


def _encode_pie(link: LinkParams) -> dict[str, int]:
    aqm = link.aqm
    if aqm.kind is not AqmKind.PIE:  # the other kinds write zeros, so old encodings stay as they were
        return {"pie_target_ns": 0, "pie_tupdate_ns": 0, "pie_alpha": 0, "pie_beta": 0, "pie_max_burst_ns": 0}
    return {"pie_target_ns": int(aqm.target), "pie_tupdate_ns": int(aqm.tupdate), "pie_alpha": encode_gain(aqm.alpha),
            "pie_beta": encode_gain(aqm.beta), "pie_max_burst_ns": int(aqm.max_burst)}


_LOSS4 = ("p13", "p31", "p32", "p23", "p14")


def _encode_loss_state(link: LinkParams) -> dict[str, int]:
    s = link.loss_state
    return {f"loss4_{n}": percent_to_prob(getattr(s, n)) if s else 0 for n in _LOSS4}


def _decode_loss_state(values: Mapping[str, int]) -> dict[str, Any] | None:
    # The data plane runs the model when p13 or p14 is non-zero.
    if not (values["loss4_p13"] or values["loss4_p14"]):
        return None
    return {n: prob_to_percent(values[f"loss4_{n}"]) for n in _LOSS4}


def _encode_slot(link: LinkParams) -> dict[str, int]:
    s = link.slot
    if s is None:
        return {"slot_delay_ns": 0, "slot_span_ns": 0, "slot_dist": 0, "slot_packets": 0, "slot_bytes": 0}
    if s.distribution is None:  # slot MIN [MAX]: uniform in [MIN, MAX]
        delay, span, dist = int(s.min), int(s.max) - int(s.min), pl.SLOT_RANGE
    else:  # slot distribution TYPE DELAY JITTER
        delay, span, dist = int(s.delay), int(s.jitter), s.distribution.code
    return {"slot_delay_ns": delay, "slot_span_ns": span, "slot_dist": dist,
            "slot_packets": int(s.packets), "slot_bytes": int(s.bytes)}


def _decode_slot(values: Mapping[str, int]) -> dict[str, Any] | None:
    # The data plane has slots when slot_delay_ns or slot_span_ns is non-zero (as netem).
    delay, span = values["slot_delay_ns"], values["slot_span_ns"]
    if not (delay or span):
        return None
    limits = {"packets": values["slot_packets"], "bytes": ByteSize(values["slot_bytes"])}
    if values["slot_dist"] == pl.SLOT_RANGE:
        return {"min": Duration(delay), "max": Duration(delay + span), **limits}
    return {"distribution": JitterDistribution.from_code(values["slot_dist"]), "delay": Duration(delay),
            "jitter": Duration(span), **limits}


MS = 1_000_000


def _encode_trace(link: LinkParams) -> dict[str, int]:
    t = link.trace
    if t is None:
        return {"trace_base": 0, "trace_len": 0, "trace_ms_base": 0, "trace_period_ms": 0, "trace_period_recip": 0}
    # The data plane divides by the period as a multiplication by this (floor, one correction).
    return {"trace_base": int(t.cells), "trace_len": int(t.opportunities), "trace_ms_base": int(t.index_cells),
            "trace_period_ms": int(t.period), "trace_period_recip": min(2**64 // (int(t.period) * MS), 2**64 - 1)}


def _decode_trace(values: Mapping[str, int]) -> dict[str, Any] | None:
    if not values["trace_len"]:
        return None
    return {"opportunities": values["trace_len"], "period": values["trace_period_ms"],
            "cells": values["trace_base"], "index_cells": values["trace_ms_base"]}


def _encode_bearers(link: LinkParams) -> dict[str, int]:
    b = link.bearers
    return {
        "bearer_sched": b.scheduler.code,
        "bearer_quantum_bytes": int(b.quantum) if b.scheduler is BearerScheduler.DRR else 0,
        "bearer_pf_halflife_log2": pf_halflife_log2(b.halflife) if b.scheduler is BearerScheduler.PF else 0,
    }


def _decode_bearers(values: Mapping[str, int]) -> dict[str, Any]:
    try:
        scheduler = BearerScheduler.from_code(values["bearer_sched"])
    except ValueError:
        return {"scheduler": str(values["bearer_sched"])}  # the scheduler field's validator names it
    if scheduler is BearerScheduler.DRR:
        return {"scheduler": scheduler, "quantum": ByteSize(values["bearer_quantum_bytes"] or pl.BEARER_DEFAULT_QUANTUM)}
    if scheduler is BearerScheduler.PF:
        return {"scheduler": scheduler, "halflife": Duration(2 ** values["bearer_pf_halflife_log2"])}
    return {}


# Correlation field -> its set_impairment param (netem's rho, as a probability).
_CORRELATION = {"delay": "delay_corr", "loss": "loss_corr", "duplicate": "dup_corr",
                "corrupt": "corrupt_corr", "reorder": "reorder_corr"}


def _encode_correlation(link: LinkParams) -> dict[str, int]:
    c = link.correlation
    corr = {param: percent_to_prob(getattr(c, field)) for field, param in _CORRELATION.items()}
    jitter = int(link.jitter)
    uniform = link.jitter_distribution is JitterDistribution.UNIFORM
    return {
        "delay_corr": corr["delay_corr"],
        # netem's uniform jitter is (answer mod 2*jitter) - jitter: the data plane takes the modulo
        # through this reciprocal (one correction step). Table jitter takes answer mod 4096 (a mask).
        "jitter_mod_recip": 2**64 // (2 * jitter) if corr["delay_corr"] and jitter and uniform else 0,
        "loss_corr": corr["loss_corr"],
        "dup_corr": corr["dup_corr"],
        "corrupt_corr": corr["corrupt_corr"],
        "reorder_corr": corr["reorder_corr"],
        "reorder_gap": int(link.reorder.gap) if percent_to_prob(link.reorder.probability) else 0,
    }


def _decode_aqm(values: Mapping[str, int]) -> dict[str, Any]:
    try:
        kind = AqmKind.from_code(values["aqm"])
    except ValueError:
        kind = values["aqm"]  # the aqm field's validator names it
    if kind is AqmKind.CODEL:
        return {"kind": kind, "target": Duration(values["codel_target_ns"]),
                "interval": Duration(values["codel_interval_ns"]), "ecn": bool(values["ecn"])}
    if kind is AqmKind.RED:
        wlog, idle, q16 = values["red_wlog"], values["red_idle_q48"], values["ns_per_byte_q16"]
        # avpkt is not a parameter of its own: it is what red_idle_q48 was computed from.
        avpkt = round(_red_idle_unit(wlog, q16) / idle) if idle and q16 and 1 <= wlog <= 31 else 0
        return {"kind": kind, "ecn": bool(values["ecn"]), "min": ByteSize(values["red_min_bytes"]),
                "max": ByteSize(values["red_max_bytes"]), "probability": prob_to_percent(values["red_max_prob"]),
                "wlog": wlog, "avpkt": ByteSize(avpkt) if 64 <= avpkt <= 65535 else None, "gentle": bool(values["red_gentle"])}
    if kind is AqmKind.PIE:
        return {"kind": kind, "target": Duration(values["pie_target_ns"]), "tupdate": Duration(values["pie_tupdate_ns"]),
                "alpha": decode_gain(values["pie_alpha"], lo=PIE_ALPHA_MIN), "beta": decode_gain(values["pie_beta"]),
                "max_burst": Duration(values["pie_max_burst_ns"]), "ecn": bool(values["ecn"])}
    return {"kind": kind, "ecn": bool(values["ecn"])}


_FIELD_TO_PARAM = {"delay": "delay_ns", "jitter": "jitter_ns", "rate": "ns_per_byte_q16",
                   "overhead": "overhead_bytes", "cell_size": "cell_bytes",
                   "cell_overhead": "cell_overhead_bytes", "queue.bytes": "queue_limit_bytes",
                   "queue.packets": "queue_limit_pkts", "loss": "loss_prob",
                   "reorder.probability": "reorder_prob", "reorder.gap": "reorder_gap", "duplicate": "dup_prob",
                   "corrupt": "corrupt_prob", "gilbert_elliott.p": "ge_p",
                   "gilbert_elliott.r": "ge_r", "aqm.kind": "aqm", "aqm.target": "codel_target_ns",
                   "aqm.interval": "codel_interval_ns", "aqm.ecn": "ecn", "aqm.min": "red_min_bytes",
                   "aqm.max": "red_max_bytes", "aqm.probability": "red_max_prob", "aqm.wlog": "red_wlog",
                   "aqm.avpkt": "red_idle_q48", "aqm.gentle": "red_gentle",
                   "aqm.tupdate": "pie_tupdate_ns", "aqm.alpha": "pie_alpha", "aqm.beta": "pie_beta",
                   "aqm.max_burst": "pie_max_burst_ns",
                   **{f"loss_state.{n}": f"loss4_{n}" for n in _LOSS4},
                   "slot.min": "slot_delay_ns", "slot.delay": "slot_delay_ns", "slot.max": "slot_span_ns",
                   "slot.jitter": "slot_span_ns", "slot.distribution": "slot_dist",
                   "slot.packets": "slot_packets", "slot.bytes": "slot_bytes",
                   "trace.opportunities": "trace_len", "trace.period": "trace_period_ms", "trace.cells": "trace_base",
                   "trace.index_cells": "trace_ms_base",
                   "bearers.scheduler": "bearer_sched", "bearers.quantum": "bearer_quantum_bytes",
                   "bearers.halflife": "bearer_pf_halflife_log2",
                   **{f"correlation.{field}": param for field, param in _CORRELATION.items()},
                   "loss_ecn": "loss_ecn",
                   # Each mean depends on both params (pi and tau).
                   **dict.fromkeys(("onoff", "onoff.mean_on", "onoff.mean_off"), "onoff_on_prob, onoff_recip")}


def _to_param_names(problems: list[Problem], aqm: int) -> list[Problem]:
    # aqm.target is CoDel's codel_target_ns or PIE's pie_target_ns, by the aqm param.
    names = {**_FIELD_TO_PARAM, "aqm.target": "pie_target_ns"} if aqm == AqmKind.PIE.code else _FIELD_TO_PARAM
    return [Problem(f"{names.get(p.path, p.path)} ({p.path})", p.message)
            for p in problems]


def same_table_params(a: LinkParams, b: LinkParams) -> bool:
    """True when both directions program the switch identically (compares encodings, so
    values that differ below the quantisation step count as the same)."""
    return encode_link(a) == encode_link(b)
