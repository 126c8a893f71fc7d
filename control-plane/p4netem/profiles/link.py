"""The impairment of one direction of a profile (`LinkParams`), in human units.

One LinkParams becomes one `set_impairment` action of the pipeline contract (see table.py).
Models are frozen: a profile is an immutable snapshot that is swapped whole, which is what
makes a profile switch atomic in the data plane too.

Besides per-field ranges, a direction is checked for settings that would silently do nothing
in the pipeline (a queue limit without a rate, reordering without a delay, ...). Values read
back from a switch skip those checks (validation context {"lenient": True}): the switch may
hold anything a P4Runtime client wrote, and it must still be shown as it is.
"""

from __future__ import annotations

import math

from enum import Enum
from typing import Annotated, Any, Mapping

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, SerializationInfo, ValidationInfo
from pydantic import WithJsonSchema, field_validator, model_serializer, model_validator


from .. import pipeline as pl
from .errors import KNOWN_FIELDS, FieldProblems, Problem
from .fields import (MAX_S16, CellBytes16, Delay48, LinkRate, Overhead16, PositiveProbability, Probability,
                     QueueBytes32, QueuePackets32, byte_size, duration, flag, integer)
from .gilbert_elliott import GilbertElliott
from .onoff import OnOff
from .pie import (PIE_DEFAULT_ALPHA, PIE_DEFAULT_BETA, PIE_DEFAULT_MAX_BURST, PIE_DEFAULT_TARGET, PIE_DEFAULT_TUPDATE,
                  PieAlpha, PieBeta, PieBurst, PieUpdate)
from .units import ByteSize, Duration, Percent, Rate, UnitError, quote

__all__ = ["JitterDistribution", "Reorder", "Correlation", "JITTER_CORR_MAX", "Queue", "AqmKind", "Aqm",
           "OnOff", "LossState", "Slot", "TracePlacement", "BearerScheduler", "Bearers", "LinkParams"]

# CoDel times: the control law scales the interval as a 32-bit count of ns (as Linux does).
CodelTime = duration(1_000, 2**32 - 1)
EcnFlag = flag("mark CE instead of dropping ECN-capable packets")
# RED thresholds (red_min_bytes/red_max_bytes bit<32>), average packet and weight (W = 2^-wlog).
RedBytes = byte_size(1, 2**32 - 1)
RedAvpkt = byte_size(64, 65535)
RedWlog = integer(1, 23, "(the average's weight is 2^-wlog)")
GentleFlag = flag("gentle RED: the marking probability rises from max_p at max to 1 at 2 max")
# netem's `ecn` (tc-netem(8)): every loss event of the direction's loss model marks instead of dropping.
LossEcnFlag = flag("mark ECN-capable packets CE instead of losing them (netem's ecn), for whichever loss model is set")
RED_DEFAULT_PROBABILITY = Percent(2)  # tc-red's default
RED_DEFAULT_AVPKT = ByteSize(1000)  # tc-red's default
_RED_FIELDS = ("min", "max", "probability", "avpkt", "wlog", "gentle")
_PIE_FIELDS = ("tupdate", "alpha", "beta", "max_burst")
# netem slots: times up to a minute (slot_delay_ns + slot_span_ns stay far inside 48 bits); the
# limits are netem's (s32 in struct tc_netem_slot).
SlotTime = duration(0, 60 * 10**9)
SlotPackets = integer(0, 2**31 - 1, "packets", zero_word="unlimited")
SlotBytes = byte_size(0, 2**31 - 1, zero_word="unlimited")


def red_wlog_for_burst(min_bytes: int, burst: int, avpkt: int) -> int:
    """tc's choice of the weight (iproute2 tc_red_eval_ewma): the largest W = 2^-wlog for which a
    burst of `burst` back-to-back packets into an empty queue does not lift the average above
    min: burst + 1 - min/avpkt <= (1 - (1 - W)^burst) / W. Raises ValueError if none does."""
    a = burst + 1 - min_bytes / avpkt
    if a < 1:
        raise ValueError(f"burst {burst} is too small for min {min_bytes} bytes; try burst {1 + min_bytes // avpkt}")
    w = 0.5
    for wlog in range(1, 32):
        if a <= (1 - (1 - w) ** burst) / w:
            return wlog
        w /= 2
    raise ValueError(f"no weight fits burst {burst} (min {min_bytes}, avpkt {avpkt})")


class JitterDistribution(str, Enum):
    """Shape of the jitter sample; `code` is the contract's jitter_dist value."""

    NONE = "none"
    UNIFORM = "uniform"  # +/- jitter
    NORMAL = "normal"  # sigma = jitter (table-driven, like netem)
    PARETO = "pareto"
    PARETONORMAL = "paretonormal"
    USER = "user"  # the user table of dist_table

    @property
    def code(self) -> int:
        return _DIST_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> "JitterDistribution":
        for dist, value in _DIST_CODES.items():
            if value == code:
                return dist
        raise ValueError(f"jitter_dist {code} is not a distribution code; allowed 0..5")

    @classmethod
    def parse(cls, raw: Any) -> "JitterDistribution":
        if isinstance(raw, cls):
            return raw
        if isinstance(raw, str):
            for dist in cls:
                if dist.value == raw.strip().lower():
                    return dist
        allowed = ", ".join(d.value for d in cls)
        raise ValueError(f"{quote(raw)} is not a distribution; allowed {allowed}")


_DIST_CODES = {dist: int(pl.JitterDist[dist.name]) for dist in JitterDistribution}

Distribution = Annotated[JitterDistribution,
                         PlainValidator(JitterDistribution.parse),
                         PlainSerializer(lambda d: d.value),
                         WithJsonSchema({"enum": [d.value for d in JitterDistribution]})]


KeepOrder = flag("keep per-direction release order")
# netem's gap (u32 in struct tc_netem_qopt): 1 lets every packet skip the delay line.
ReorderGap = integer(1, 2**32 - 1, "packets")
# netem keeps jitter in an s32 (netem_change clamps it to INT_MAX ns): with delay correlation the
# jitter's draw goes through netem's tabledist, whose arithmetic needs it.
JITTER_CORR_MAX = 2**31 - 1


class Reorder(BaseModel):
    """Ordering of released packets.

    keep_order: true keeps per-direction release order (jitter never reorders: a packet is
    never released before the one admitted ahead of it); false lets jitter reorder.
    probability: share of packets that skip the delay line and leave early (netem "reorder").
    gap: netem's gap: the first gap - 1 packets after each one that skipped the line (and from
    the start) always take it; then each packet skips it with `probability`. 1 (netem's default)
    lets every packet skip.
    Shorthand: `reorder: 25%` is `{probability: 25%}`.
    """

    # defer_build: the schema is built when first used, not at import: importing the models
    # must stay quick (a `p4netem` command's start-up, tests/unit/test_cli_startup.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    keep_order: KeepOrder = True
    probability: Probability = Percent(0)
    gap: ReorderGap = 1

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, (str, int, float)) and not isinstance(data, bool):
            return {"probability": data}
        if isinstance(data, (Mapping, Reorder)):
            return data
        raise ValueError(f"{quote(data)} is not a reorder block "
                         "({keep_order, probability, gap}) or a percentage")


class Correlation(BaseModel):
    """netem's correlation of a direction's random draws (tc-netem(8)'s CORRELATION), each a
    percentage, 0% = independent draws. Linux's sch_netem get_crandom, per profile, direction and
    use: value = a fresh uniform 32-bit draw, rho = corr + 1 (corr as a fraction of 2^32),
    answer = (value * (2^32 - rho) + last * rho) >> 32, last = answer (the first `last` is itself
    a uniform draw). `delay` correlates the jitter's draw, `loss` the random (`loss`) model's,
    `duplicate`, `corrupt` and `reorder` theirs."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    delay: Probability = Percent(0)
    loss: Probability = Percent(0)
    duplicate: Probability = Percent(0)
    corrupt: Probability = Percent(0)
    reorder: Probability = Percent(0)

    @model_validator(mode="before")
    @classmethod
    def _block(cls, data: Any) -> Any:
        if isinstance(data, (Mapping, Correlation)):
            return data
        raise ValueError(f"{quote(data)} is not a correlation block ({{delay, loss, duplicate, corrupt, "
                         "reorder}, each a percentage)")


class Queue(BaseModel):
    """Limits of the rate queue (packets admitted but not yet serialised); 0 = unlimited.

    A packet that would push the backlog over either limit is dropped (drop-tail).
    Shorthand: `queue: 25` is `{packets: 25}`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    packets: QueuePackets32 = 0
    bytes: QueueBytes32 = ByteSize(0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"packets": data}
        if isinstance(data, str) and data.strip().lower() == "unlimited":
            return {}
        if isinstance(data, (Mapping, Queue)):
            return data
        raise ValueError(f"{quote(data)} is not a queue block ({{packets, bytes}}) "
                         "or a number of packets")

    @property
    def unlimited(self) -> bool:
        return self.packets == 0 and self.bytes == 0


class AqmKind(str, Enum):
    """How the rate queue decides which packets to drop (or ECN-mark)."""

    TAIL_DROP = "tail-drop"  # only when a queue limit is reached
    CODEL = "codel"  # RFC 8289, at each packet's dequeue
    RED = "red"  # Floyd & Jacobson, Linux sch_red's arithmetic, as each packet arrives
    PIE = "pie"  # RFC 8033, Linux sch_pie's arithmetic, as each packet arrives

    @property
    def code(self) -> int:
        return int(pl.Aqm[self.name])

    @classmethod
    def from_code(cls, code: int) -> "AqmKind":
        for kind in cls:
            if kind.code == code:
                return kind
        raise ValueError(f"aqm {code} is not an AQM of the contract (0 tail-drop, 1 codel, 2 red, 3 pie)")


class Aqm(BaseModel):
    """Active queue management of the rate queue (a queue limit still drops at the tail).

    `aqm: codel` is CoDel with RFC 8289's defaults (target 5ms, interval 100ms). `aqm: {kind: red,
    max: ...}` is RED on the average queue in bytes, with tc-red's defaults (min = max / 3,
    probability 2 %, avpkt 1000 bytes, the weight tc derives from burst = (2 min + max) / (3 avpkt));
    `gentle: true` is gentle RED. `aqm: pie` is PIE (RFC 8033 with Linux sch_pie's arithmetic) with
    tc-pie's defaults (target 15ms, tupdate 15ms, alpha 0.125 and beta 1.25 Hz, max_burst 150ms),
    filled in as RED's are. `ecn: true` marks ECN-capable packets CE instead of dropping them
    (RFC 3168)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: AqmKind = AqmKind.TAIL_DROP
    target: CodelTime = Duration(5_000_000)
    interval: CodelTime = Duration(100_000_000)
    ecn: EcnFlag = False
    # RED only (None for the other kinds; filled in with tc-red's defaults for red).
    min: RedBytes | None = None
    max: RedBytes | None = None
    probability: PositiveProbability | None = None
    avpkt: RedAvpkt | None = None
    wlog: RedWlog | None = None
    gentle: GentleFlag | None = None
    # PIE only (None for the other kinds; filled in with tc-pie's defaults for pie, whose target
    # defaults to 15ms instead of CoDel's 5ms).
    tupdate: PieUpdate | None = None
    alpha: PieAlpha | None = None
    beta: PieBeta | None = None
    max_burst: PieBurst | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"kind": data.strip().lower()}
        if isinstance(data, (Mapping, Aqm)):
            return data
        raise ValueError(f"{quote(data)} is not an aqm block ({{kind, target, interval, ecn, min, max, "
                         "probability, avpkt, wlog, gentle, tupdate, alpha, beta, max_burst}}) or one of tail-drop, "
                         "codel, red, pie")

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, data: Any) -> Any:
        if isinstance(data, AqmKind):
            return data
        allowed = ", ".join(k.value for k in AqmKind)
        if not isinstance(data, str) or data.strip().lower() not in {k.value for k in AqmKind}:
            raise ValueError(f"{quote(data)} is not an AQM; allowed {allowed}")
        return AqmKind(data.strip().lower())

    @model_validator(mode="after")
    def _kind_settings(self) -> "Aqm":
        if self.kind is AqmKind.CODEL and self.target >= self.interval:
            raise FieldProblems([Problem("target", f"{self.target} must be below the interval "
                                         f"{self.interval} (RFC 8289: 5-10% of it)")])
        problems = []
        if self.kind is not AqmKind.RED:
            problems += [Problem(f, f"is a RED setting; {self.kind.value} has none (kind red uses it)")
                         for f in _RED_FIELDS if getattr(self, f) is not None]
        if self.kind is not AqmKind.PIE:
            problems += [Problem(f, f"is a PIE setting; {self.kind.value} has none (kind pie uses it)")
                         for f in _PIE_FIELDS if getattr(self, f) is not None]
        elif "interval" in self.model_fields_set:
            problems.append(Problem("interval", "is a CoDel setting; pie has none (its update period is tupdate)"))
        if problems:
            raise FieldProblems(problems)
        if self.kind is AqmKind.RED:
            return self._red_defaults()
        if self.kind is AqmKind.PIE:
            return self._pie_defaults()
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any, info: SerializationInfo) -> Any:
        data = handler(self)
        # A pie's target defaults to 15ms, not to the field's 5ms (CoDel's): left out as a default, a
        # pie target of 5ms would read back as 15ms.
        if self.kind is AqmKind.PIE and isinstance(data, dict) and "target" not in data and info.exclude_defaults:
            kind = {"kind": data.pop("kind")} if "kind" in data else {}
            data = {**kind, "target": str(self.target), **data}
        return data

    def _pie_defaults(self) -> "Aqm":
        """tc-pie's defaults (Linux sch_pie pie_params_init), filled into the frozen model."""
        fill: dict[str, Any] = {"tupdate": PIE_DEFAULT_TUPDATE, "alpha": PIE_DEFAULT_ALPHA, "beta": PIE_DEFAULT_BETA,
                                "max_burst": PIE_DEFAULT_MAX_BURST}
        fill = {name: value for name, value in fill.items() if getattr(self, name) is None}
        if "target" not in self.model_fields_set:
            fill["target"] = PIE_DEFAULT_TARGET
        for name, value in fill.items():
            object.__setattr__(self, name, value)
        return self

    def _red_defaults(self) -> "Aqm":
        """tc-red's defaults and checks (iproute2 q_red.c), filled into the frozen model."""
        if self.max is None:
            raise FieldProblems([Problem("max", "RED needs a max threshold (bytes of average queue, "
                                         "e.g. max: 90KB; min defaults to max / 3)")])
        fill: dict[str, Any] = {}
        lo = self.min if self.min is not None else ByteSize(max(1, int(self.max) // 3))
        fill["min"] = lo
        if lo >= self.max:
            raise FieldProblems([Problem("min", f"{lo} must be below max {self.max}")])
        prob = self.probability if self.probability is not None else RED_DEFAULT_PROBABILITY
        fill["probability"] = prob
        # Marks are spaced by a draw in [0, (max - min) / max_p): it must fit the 32-bit red_span_bytes.
        if (int(self.max) - int(lo)) * 100 / float(prob) > 2**32 - 1:
            raise FieldProblems([Problem("probability", f"{prob} is too small for max - min = "
                                         f"{int(self.max) - int(lo)} bytes: (max - min) / probability must stay "
                                         "below 4 GiB")])
        avpkt = self.avpkt if self.avpkt is not None else RED_DEFAULT_AVPKT
        fill["avpkt"] = avpkt
        if self.wlog is None:
            burst = (2 * int(lo) + int(self.max)) // (3 * int(avpkt))
            try:
                wlog = red_wlog_for_burst(int(lo), burst, int(avpkt))
            except ValueError as exc:
                raise FieldProblems([Problem("wlog", f"{exc}; give wlog 1..23 instead")]) from None
            if wlog > 23:
                raise FieldProblems([Problem("wlog", f"tc's rule gives {wlog}, above 23; give wlog 1..23")])
            fill["wlog"] = wlog
        fill["gentle"] = bool(self.gentle)
        for name, value in fill.items():
            object.__setattr__(self, name, value)
        return self


class LossState(BaseModel):
    """netem's 4-state loss model (`loss state p13 p31 p32 p23 p14`, tc-netem(8)): state 1 received
    in a gap, 2 received in a burst, 3 lost in a burst, 4 an isolated loss in a gap; per packet the
    chain moves 1 -> 3 with p13, 1 -> 4 with p14, 3 -> 1 with p31, 3 -> 2 with p32, 2 -> 3 with p23,
    4 -> 1 always, and the packet is lost in states 3 and 4. Defaults are iproute2's: p31 = 100% -
    p13, p32 0, p23 100%, p14 0."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    p13: Probability
    p31: Probability | None = None
    p32: Probability = Percent(0)
    p23: Probability = Percent(100)
    p14: Probability = Percent(0)

    @model_validator(mode="after")
    def _defaults(self) -> "LossState":
        if self.p31 is None:
            object.__setattr__(self, "p31", Percent(100 - self.p13))
        problems = []
        if self.p13 == 0 and self.p14 == 0:
            problems.append(Problem("p13", "and p14 are both 0: the chain never leaves state 1 (no loss); "
                                    "leave loss_state out"))
        if self.p13 + self.p14 > 100:
            problems.append(Problem("p14", f"p13 + p14 = {self.p13 + self.p14}% leaves state 1 more than always "
                                    "(their sum must be at most 100%)"))
        if self.p31 + self.p32 > 100:
            problems.append(Problem("p32", f"p31 + p32 = {self.p31 + self.p32}% leaves state 3 more than always "
                                    "(their sum must be at most 100%)"))
        if problems:
            raise FieldProblems(problems)
        return self


class Slot(BaseModel):
    """netem's slotted delivery (tc-netem(8) `slot`): packets that are due wait for the next slot and
    leave together, at most `packets` packets and `bytes` bytes per slot (0 = unlimited; the packet
    that reaches the byte limit still goes). A used-up slot is followed by the next one a slot delay
    later; a packet due after the current slot opened waits one slot delay from its due time.
    The slot delay is either uniform in [min, max] (`slot MIN [MAX]`; max defaults to min) or drawn
    from a distribution with mean `delay` and scale `jitter` (`slot distribution TYPE DELAY JITTER`).
    Shorthand: `slot: 10ms` is `{min: 10ms}`."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    min: SlotTime | None = None
    max: SlotTime | None = None
    distribution: Distribution | None = None
    delay: SlotTime | None = None
    jitter: SlotTime | None = None
    packets: SlotPackets = 0
    bytes: SlotBytes = ByteSize(0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, (str, int)) and not isinstance(data, bool):
            return {"min": data}
        if isinstance(data, (Mapping, Slot)):
            return data
        raise ValueError(f"{quote(data)} is not a slot block ({{min, max, packets, bytes}} or "
                         "{distribution, delay, jitter, packets, bytes}) or a slot time")

    @model_validator(mode="after")
    def _one_form(self) -> "Slot":
        problems = []
        if self.distribution is None:
            problems += [Problem(f, "belongs to the distribution form (give distribution, delay and jitter), "
                                 "not to min/max") for f in ("delay", "jitter") if getattr(self, f) is not None]
            if self.min is None:
                problems.append(Problem("min", "is needed: slot {min, max} (uniform slot delays) or "
                                        "{distribution, delay, jitter}"))
            else:
                if self.max is None:
                    object.__setattr__(self, "max", self.min)
                elif self.max < self.min:
                    problems.append(Problem("max", f"{self.max} must be at least min {self.min}"))
                if self.min == 0 and self.max == 0:
                    problems.append(Problem("min", "and max are 0: netem turns slotting off; leave slot out"))
        else:
            problems += [Problem(f, "belongs to the min/max form, not to the distribution form")
                         for f in ("min", "max") if getattr(self, f) is not None]
            if self.distribution is JitterDistribution.NONE:
                problems.append(Problem("distribution", "none is not a slot distribution; allowed uniform, "
                                        "normal, pareto, paretonormal, user"))
            if self.delay is None:
                object.__setattr__(self, "delay", Duration(0))
            if not self.jitter:
                problems.append(Problem("jitter", "must be above 0 (tc refuses a non-positive slot jitter); for "
                                        "fixed slots use {min: DELAY}"))
        if problems:
            raise FieldProblems(problems)
        return self


TraceCount = integer(1, 2**32 - 1, "opportunities")
TracePeriod = integer(1, 2**32 - 1, "ms")
TraceCell = integer(0, 2**32 - 1, "cells")


class TracePlacement(BaseModel):
    """A Mahimahi trace the data plane plays itself (exact delivery, docs/control.md): `opportunities`
    timestamps repeating every `period` ms, loaded by the controller into the switch's trace
    registers at `cells` (trace_opportunity_ms) and `index_cells` (trace_first_at). Written by
    `Controller.load_trace` / `p4netem trace load`, which find the free cells; a profile file names
    a trace by these only when the switch already holds it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    opportunities: TraceCount
    period: TracePeriod
    cells: TraceCell = 0
    index_cells: TraceCell = 0


class BearerScheduler(str, Enum):
    """How a cell shares its rate between the UEs' bearer queues (`code`: bearer_sched)."""

    FIFO = "fifo"  # no bearers: one rate queue for every UE of the profile-direction
    DRR = "drr"  # deficit round robin by bytes
    PF = "pf"  # proportional fair (one channel quality for every UE)

    @property
    def code(self) -> int:
        return int(pl.BearerSched[self.name])

    @classmethod
    def from_code(cls, code: int) -> "BearerScheduler":
        for s in cls:
            if s.code == code:
                return s
        raise ValueError(f"bearer_sched {code} is not a scheduler of the contract (0 fifo, 1 drr, 2 pf)")


# DRR quantum: wire bytes per turn (bearer_quantum_bytes bit<32>; at least a minimal frame).
BearerQuantum = byte_size(64, 2**20)
# PF half-life: a power of two of ns on the switch (bearer_pf_halflife_log2), 2^10 ns .. 2^40 ns.
PF_HALFLIFE_LOG2 = (10, 40)
PfHalflife = duration(2**PF_HALFLIFE_LOG2[0], 2**PF_HALFLIFE_LOG2[1])
PF_DEFAULT_HALFLIFE_LOG2 = 27  # 134.217728 ms: about 100 LTE subframes, the usual PF window
_BEARER_SCHEDULERS = ", ".join(s.value for s in BearerScheduler)


class Bearers(BaseModel):
    """A queue per UE (its bearer) in a shared cell. The direction's rate is the cell's capacity,
    shared between the UEs with packets waiting; the queue limits apply to each bearer alone; a
    UE waiting for its radio's promotion holds back only its own packets.

    `bearers: drr` is deficit round robin by bytes with a quantum of one 1514-byte frame;
    `bearers: {scheduler: pf, halflife: 100ms}` is proportional fair: the UE whose average
    served bytes (halving every `halflife`, which the switch takes as the nearest power of two
    of nanoseconds) is lowest goes next. `fifo` (the default) keeps one queue for every UE."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    scheduler: BearerScheduler = BearerScheduler.FIFO
    quantum: BearerQuantum | None = None
    halflife: PfHalflife | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"scheduler": data}
        if isinstance(data, (Mapping, Bearers)):
            return data
        raise ValueError(f"{quote(data)} is not a bearers block ({{scheduler, quantum, halflife}}) "
                         f"or one of {_BEARER_SCHEDULERS}")

    @field_validator("scheduler", mode="before")
    @classmethod
    def _scheduler(cls, data: Any) -> Any:
        if isinstance(data, BearerScheduler):
            return data
        if not isinstance(data, str) or data.strip().lower() not in {s.value for s in BearerScheduler}:
            raise ValueError(f"{quote(data)} is not a bearer scheduler; allowed {_BEARER_SCHEDULERS}")
        return BearerScheduler(data.strip().lower())

    @model_validator(mode="after")
    def _defaults(self) -> "Bearers":
        problems = []
        if self.quantum is not None and self.scheduler is not BearerScheduler.DRR:
            problems.append(Problem("quantum", f"is a DRR setting; scheduler {self.scheduler.value} has none"))
        if self.halflife is not None and self.scheduler is not BearerScheduler.PF:
            problems.append(Problem("halflife", f"is a PF setting; scheduler {self.scheduler.value} has none"))
        if problems:
            raise FieldProblems(problems)
        if self.scheduler is BearerScheduler.DRR and self.quantum is None:
            object.__setattr__(self, "quantum", ByteSize(pl.BEARER_DEFAULT_QUANTUM))
        if self.scheduler is BearerScheduler.PF:
            wlog = pf_halflife_log2(self.halflife)
            object.__setattr__(self, "halflife", Duration(2**wlog))
        return self

    @property
    def on(self) -> bool:
        return self.scheduler is not BearerScheduler.FIFO


def pf_halflife_log2(halflife: Duration | None) -> int:
    """The switch's bearer_pf_halflife_log2 for a half-life: the nearest power of two of ns."""
    if halflife is None:
        return PF_DEFAULT_HALFLIFE_LOG2
    lo, hi = PF_HALFLIFE_LOG2
    return min(max(round(math.log2(int(halflife))), lo), hi)


class LinkParams(BaseModel):
    """Impairment of one direction. Defaults are "no impairment" for every field."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    delay: Delay48 = Duration(0)
    jitter: Delay48 = Duration(0)
    # Defaults to normal when jitter is set, none otherwise (resolved in _default_distribution).
    jitter_distribution: Distribution = JitterDistribution.NONE
    reorder: Reorder = Reorder()
    rate: LinkRate = Rate(0)
    # Signed, as netem's: the wire bytes are max(0, frame + overhead) (a negative overhead strips a
    # header; a frame shorter than -overhead takes no link time, where Linux's u64 sum would wrap).
    overhead: Overhead16 = 0
    # netem's `rate RATE PACKETOVERHEAD CELLSIZE CELLOVERHEAD`: the link time counts
    # ceil(wire / cell_size) cells of cell_size + cell_overhead bytes (0 = no cells; the cell
    # overhead is signed too, and a cell must keep at least one byte: _cell_problems).
    cell_size: CellBytes16 = 0
    cell_overhead: Overhead16 = 0
    queue: Queue = Queue()
    aqm: Aqm = Aqm()
    # Mahimahi's mm-onoff: the link goes off for exponential periods (stage 3, before the loss models).
    onoff: OnOff | None = None
    loss: Probability = Percent(0)
    gilbert_elliott: GilbertElliott | None = None
    loss_state: LossState | None = None
    loss_ecn: LossEcnFlag = False
    slot: Slot | None = None
    bearers: Bearers = Bearers()
    trace: TracePlacement | None = None
    duplicate: Probability = Percent(0)
    corrupt: Probability = Percent(0)
    correlation: Correlation = Correlation()

    @model_validator(mode="before")
    @classmethod
    def _default_distribution(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or data.get("jitter_distribution") is not None:
            return data
        data = dict(data)
        data.pop("jitter_distribution", None)
        try:
            has_jitter = Duration.parse(data.get("jitter", 0)) != 0
        except UnitError:
            return data  # the jitter field reports it
        if has_jitter:
            data["jitter_distribution"] = JitterDistribution.NORMAL
        return data

    @field_validator("gilbert_elliott", mode="before")
    @classmethod
    def _ge_block(cls, data: Any) -> Any:
        if data is None or isinstance(data, (Mapping, GilbertElliott)):
            return data
        raise ValueError(f"{quote(data)} is not a gilbert_elliott block {{p, r, loss_good, "
                         "loss_bad}")

    @model_validator(mode="after")
    def _effective(self, info: ValidationInfo) -> "LinkParams":
        if info.context and info.context.get("lenient"):
            return self
        problems = self.ineffective_settings()
        if problems:
            raise FieldProblems(problems)
        return self

    def ineffective_settings(self) -> list[Problem]:
        """Settings that the pipeline would ignore, each with the field that holds it."""
        problems = []
        if self.jitter and self.jitter_distribution is JitterDistribution.NONE:
            problems.append(Problem("jitter_distribution", f"none leaves jitter {self.jitter} "
                                    "unused; pick uniform, normal, pareto, paretonormal or user"))
        if self.reorder.probability and not (self.delay or self.jitter):
            problems.append(Problem("reorder.probability", f"{self.reorder.probability} has no "
                                    "effect without a delay or jitter to skip"))
        if self.rate == 0 and self.trace is None and not self.queue.unlimited:
            problems.append(Problem("queue", "a queue limit needs a rate (without one the rate "
                                    "queue is always empty)"))
        if self.rate == 0 and self.trace is None and self.aqm.kind is not AqmKind.TAIL_DROP:
            problems.append(Problem("aqm", f"{self.aqm.kind.value} needs a rate or a trace (without one the "
                                    "rate queue is always empty)"))
        if self.rate == 0 and self.bearers.on:
            problems.append(Problem("bearers", f"{self.bearers.scheduler.value} needs a rate (the cell's capacity "
                                    "that the UEs share)"))
        if self.bearers.on and self.aqm.kind is not AqmKind.TAIL_DROP:
            problems.append(Problem("aqm", f"{self.aqm.kind.value} manages the single rate queue; with bearers each "
                                    "UE's queue is tail drop (leave aqm out, or bearers fifo)"))
        if self.aqm.ecn and self.aqm.kind is AqmKind.TAIL_DROP:
            problems.append(Problem("aqm.ecn", "marks only where an AQM would drop; pick aqm codel, red or pie "
                                    "(a full queue always drops)"))
        if self.rate == 0 and self.overhead:
            problems.append(Problem("overhead", f"{self.overhead} bytes needs a rate (overhead "
                                    "only counts in the rate computation)"))
        # As overhead: cells only change the rate's link time (a trace's delivery opportunities
        # and the queue limits count frames and wire bytes, never cells).
        if self.rate == 0 and self.cell_size:
            problems.append(Problem("cell_size", f"{self.cell_size} bytes needs a rate (cells only count "
                                    "in the rate computation)"))
        problems += self._cell_problems()
        if self.trace is not None and self.rate:
            problems.append(Problem("rate", f"{self.rate} is not used with a trace: the trace's delivery "
                                    "opportunities are the link (leave rate out)"))
        if self.loss_state is not None and (self.loss or self.gilbert_elliott is not None):
            problems.append(Problem("loss_state", "is a loss model of its own: leave loss and gilbert_elliott "
                                    "out (the data plane uses one model per direction)"))
        if self.loss and self.gilbert_elliott is not None:
            problems.append(Problem("loss", f"{self.loss} is ignored when gilbert_elliott is "
                                    "set; give the loss as gilbert_elliott.loss_good/loss_bad"))
        # A loss model is on exactly when the data plane runs one: loss_prob, ge_p (gilbert_elliott.p
        # is above 0) or loss4_p13/p14 (loss_state refuses both 0) non-zero. As for tc, a
        # gilbert_elliott block whose loss_good and loss_bad are 0 still counts: it is set (and
        # loses nothing, which is the model's doing, not ecn's).
        if self.loss_ecn and not (self.loss or self.gilbert_elliott is not None or self.loss_state is not None):
            problems.append(Problem("loss_ecn", "true has no effect without a loss model: set loss, gilbert_elliott "
                                    "or loss_state (it marks what the model would lose; tc refuses netem's ecn "
                                    "without one too: \"ecn requested without loss model\")"))
        return problems + self._ineffective_correlation()

    def _cell_problems(self) -> list[Problem]:
        """A cell overhead needs cells; with cells, each must keep at least one byte on the link: at 0
        or below the switch counts max(0, cell_size + cell_overhead) = 0 bytes per cell (no link time
        at all), and netem's u32 sum of its u32 cell size and s32 cell overhead wraps below 0."""
        size, overhead = self.cell_size, self.cell_overhead
        if overhead and not size:
            return [Problem("cell_overhead", f"{overhead} bytes has no effect without cell_size (it is "
                            "each cell's header; without cells nothing adds it)")]
        if size and size + overhead < 1:
            return [Problem("cell_overhead", f"{overhead} bytes leaves each {size}-byte cell {size + overhead} "
                            f"bytes on the link (a packet would take no link time at the rate); allowed "
                            f"{1 - size}..{MAX_S16} with cell_size {size}")]
        return []

    def _ineffective_correlation(self) -> list[Problem]:
        """Correlations (and reorder.gap) with no draw to apply to, as netem would ignore them."""
        c, problems = self.correlation, []
        if c.delay and not self.jitter:
            problems.append(Problem("correlation.delay", f"{c.delay} has no effect without jitter (netem "
                                    "correlates the jitter's draw)"))
        elif c.delay and self.jitter > JITTER_CORR_MAX:
            problems.append(Problem("correlation.delay", f"{c.delay} needs jitter at most {JITTER_CORR_MAX}ns "
                                    f"(netem's limit; jitter is {self.jitter}); leave the correlation out "
                                    "for a larger jitter"))
        if c.loss and (self.gilbert_elliott is not None or self.loss_state is not None):
            model = "gilbert_elliott" if self.gilbert_elliott is not None else "loss_state"
            problems.append(Problem("correlation.loss", f"{c.loss} does not apply to {model}: netem correlates "
                                    "only random loss (`loss`); the Markov models have their own memory"))
        elif c.loss and not self.loss:
            problems.append(Problem("correlation.loss", f"{c.loss} has no effect without loss"))
        if c.duplicate and not self.duplicate:
            problems.append(Problem("correlation.duplicate", f"{c.duplicate} has no effect without duplicate"))
        if c.corrupt and not self.corrupt:
            problems.append(Problem("correlation.corrupt", f"{c.corrupt} has no effect without corrupt"))
        if c.reorder and not self.reorder.probability:
            problems.append(Problem("correlation.reorder", f"{c.reorder} has no effect without "
                                    "reorder.probability"))
        if self.reorder.gap > 1 and not self.reorder.probability:
            problems.append(Problem("reorder.gap", f"{self.reorder.gap} has no effect without reorder.probability "
                                    "(tc: gap specified without reorder probability)"))
        return problems

    @property
    def passthrough(self) -> bool:
        """True when this direction changes nothing."""
        return self == LinkParams()

    def to_table_params(self) -> dict[str, int]:
        """The contract's set_impairment params for this direction (see table.py)."""
        from .table import encode_link

        return encode_link(self)

    @classmethod
    def from_table_params(cls, params: Mapping[str, Any]) -> "LinkParams":
        """The direction a set of set_impairment params means (see table.py)."""
        from .table import decode_link

        return decode_link(params)


KNOWN_FIELDS.update(LinkParams.model_fields, Reorder.model_fields, Correlation.model_fields, Queue.model_fields,
                    Aqm.model_fields, LossState.model_fields, Slot.model_fields, TracePlacement.model_fields,
                    Bearers.model_fields)
