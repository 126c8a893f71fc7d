"""One-line summaries of profiles, as a Markdown table (docs/profiles.md embeds the table of the
built-in library; a test keeps the two identical)."""

from __future__ import annotations

from typing import Iterable

from .link import AqmKind, BearerScheduler, LinkParams, OnOff, Slot, TracePlacement
from .pie import PIE_DEFAULT_ALPHA, PIE_DEFAULT_BETA, PIE_DEFAULT_MAX_BURST, gain_text
from .units import Percent
from .profile import Profile

__all__ = ["markdown_table", "radio_summary", "link_summary"]

HEADER = ("| name | title | down rate | up rate | delay (one way) | jitter (sigma) | loss | queue "
          "| radio | source |")


def _pair(down: str, up: str) -> str:
    return down if down == up else f"{down} / {up}"


def _corr(value: Percent) -> str:
    """netem's correlation of a draw, as a suffix ("" when the draws are independent)."""
    return f" (correlation {value})" if value else ""


def _notes(*notes: str) -> str:
    """The non-empty notes as one parenthesised suffix ("" when there are none)."""
    notes = tuple(n for n in notes if n)
    return f" ({', '.join(notes)})" if notes else ""


def _loss(link: LinkParams) -> str:
    # netem's ecn marks what the model loses: a note on the loss, whichever model it is.
    ecn = "ecn" if link.loss_ecn else ""
    ge, state = link.gilbert_elliott, link.loss_state
    if ge is not None:
        return f"GE p={ge.p} r={ge.r}{_notes(f'mean {ge.mean_loss * 100:.3g}%', ecn)}"
    if state is not None:
        return (f"state p13={state.p13} p31={state.p31} p32={state.p32} p23={state.p23} "
                f"p14={state.p14}{_notes(ecn)}")
    if not link.loss:
        return "-"
    return f"{link.loss}{_notes(f'correlation {link.correlation.loss}' if link.correlation.loss else '', ecn)}"


def _onoff(onoff: OnOff) -> str:
    return f"on/off link (mean on {onoff.mean_on}, off {onoff.mean_off}: off {onoff.off_share * 100:.3g}%)"


def _queue(link: LinkParams) -> str:
    parts = []
    if link.queue.packets:
        parts.append(f"{link.queue.packets} pkt")
    if link.queue.bytes:
        parts.append(str(link.queue.bytes))
    return " + ".join(parts) if parts else "unlimited"


def _jitter(link: LinkParams) -> str:
    if not link.jitter:
        return "-"
    return f"{link.jitter} {link.jitter_distribution.value}{_corr(link.correlation.delay)}"


def _framing(link: LinkParams) -> tuple[str, str]:
    """What the rate counts besides the frame: the per-packet overhead and netem's cells ("" each
    when not set)."""
    overhead = f"overhead {link.overhead}B" if link.overhead else ""
    cells = ""
    if link.cell_size:
        # Each cell's bytes on the link, as a sum: `48B + 5B` (ATM's header), `48B - 5B` (a negative one).
        sign = "-" if link.cell_overhead < 0 else "+"
        cells = f"cells {link.cell_size}B" + (f" {sign} {abs(link.cell_overhead)}B" if link.cell_overhead else "")
    elif link.cell_overhead:  # only read back from a switch (a profile refuses it): shown as it is
        cells = f"cell overhead {link.cell_overhead}B"
    return overhead, cells


def _trace(trace: TracePlacement) -> str:
    """A trace's size and mean rate in full-size frames (one per opportunity), as `trace load` says."""
    from ..control.trace import FRAME_BYTES  # control imports profiles: here, not at the top

    bps = trace.opportunities * FRAME_BYTES * 8 * 1000 / trace.period
    mean = f"{bps / 1e6:.3g} Mbit/s" if bps >= 1e6 else f"{bps / 1e3:.3g} kbit/s"
    return f"{trace.opportunities} opportunities / {trace.period} ms (mean {mean})"


def _bearers(link: LinkParams) -> str:
    b = link.bearers
    if b.scheduler is BearerScheduler.PF:
        return f"pf{_notes(f'halflife {b.halflife}' if b.halflife else '')}"
    return f"{b.scheduler.value}{_notes(f'quantum {b.quantum}' if b.quantum else '')}"


def _aqm(link: LinkParams) -> str:
    a = link.aqm
    ecn = "ecn" if a.ecn else ""
    if a.kind is AqmKind.CODEL:
        return f"codel{_notes(f'target {a.target}', f'interval {a.interval}', ecn)}"
    if a.kind is AqmKind.PIE:
        # alpha, beta and the burst allowance only when they are not tc-pie's defaults.
        return "pie" + _notes(f"target {a.target}", f"tupdate {a.tupdate}",
                              f"alpha {gain_text(a.alpha)}" if a.alpha != PIE_DEFAULT_ALPHA else "",
                              f"beta {gain_text(a.beta)}" if a.beta != PIE_DEFAULT_BETA else "",
                              f"max_burst {a.max_burst}" if a.max_burst != PIE_DEFAULT_MAX_BURST else "", ecn)
    # A red block always has min, max and probability (tc-red's defaults fill what is not given).
    return f"red{_notes(f'min {a.min}', f'max {a.max}', f'p {a.probability}', 'gentle' if a.gentle else '', ecn)}"


def _slot(slot: Slot) -> str:
    if slot.distribution is not None:
        when = f"{slot.distribution.value} {slot.delay} {slot.jitter}"
    else:
        when = str(slot.min) if slot.max == slot.min else f"{slot.min}..{slot.max}"
    return when + _notes(f"packets {slot.packets}" if slot.packets else "",
                         f"bytes {slot.bytes}" if slot.bytes else "")


def link_summary(link: LinkParams) -> str:
    """The impairments of one direction that are on, in one line ("no impairment" if none)."""
    parts = []
    # The overhead and the cells change only the rate's link time: shown with the rate.
    framing = _framing(link)
    if link.rate:
        parts.append(f"rate {link.rate}{_notes(*framing)}")
    if link.delay:
        parts.append(f"delay {link.delay}")
    if link.jitter:
        parts.append(f"jitter {_jitter(link)}")
    if not link.reorder.keep_order:
        parts.append("jitter may reorder")
    if link.reorder.probability:
        gap = f" gap {link.reorder.gap}" if link.reorder.gap > 1 else ""
        parts.append(f"reorder {link.reorder.probability}{gap}{_corr(link.correlation.reorder)}")
    # Stage 3 runs the on/off link before the loss models.
    if link.onoff is not None:
        parts.append(_onoff(link.onoff))
    if link.loss or link.gilbert_elliott is not None or link.loss_state is not None:
        parts.append(f"loss {_loss(link)}")
    if link.trace is not None:
        parts.append(f"trace {_trace(link.trace)}")
    if link.bearers.on:
        parts.append(f"bearers {_bearers(link)}")
    if (link.rate or link.trace is not None) and not link.queue.unlimited:
        parts.append(f"queue {_queue(link)}")
    if link.aqm.kind is not AqmKind.TAIL_DROP:
        parts.append(_aqm(link))
    if link.slot is not None:
        parts.append(f"slot {_slot(link.slot)}")
    if not link.rate:
        # Without a rate they do nothing (a profile refuses them; a switch may hold them): still shown.
        parts += [f for f in framing if f]
    if link.duplicate:
        parts.append(f"duplicate {link.duplicate}{_corr(link.correlation.duplicate)}")
    if link.corrupt:
        parts.append(f"corrupt {link.corrupt}{_corr(link.correlation.corrupt)}")
    return ", ".join(parts) if parts else "no impairment"


def radio_summary(profile: Profile) -> str:
    radio = profile.radio
    if radio.model == "umts":
        return f"umts (IDLE->DCH {radio.promotion_idle_dch})"
    if radio.model in ("lte", "gprs"):
        return f"{radio.model} (wake-up {radio.promotion})"
    return "-"


def markdown_table(profiles: Iterable[Profile]) -> str:
    rows = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for p in profiles:
        down, up = p.downlink, p.uplink
        cells = [
            f"`{p.name}`", p.title, str(down.rate), str(up.rate),
            _pair(str(down.delay), str(up.delay)), _pair(_jitter(down), _jitter(up)),
            _pair(_loss(down), _loss(up)), _pair(_queue(down), _queue(up)), radio_summary(p),
            p.source.replace("|", "\\|"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
