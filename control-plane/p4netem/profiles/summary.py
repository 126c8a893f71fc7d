"""One-line summaries of profiles, as a Markdown table (docs/profiles.md embeds the table of the
built-in library; a test keeps the two identical)."""

from __future__ import annotations

from typing import Iterable

from .link import LinkParams
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
        cells = f"cells {link.cell_size}B" + (f" + {link.cell_overhead}B" if link.cell_overhead else "")
    elif link.cell_overhead:  # only read back from a switch (a profile refuses it): shown as it is
        cells = f"cell overhead {link.cell_overhead}B"
    return overhead, cells


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
    if link.loss or link.gilbert_elliott is not None or link.loss_state is not None:
        parts.append(f"loss {_loss(link)}")
    if link.rate and not link.queue.unlimited:
        parts.append(f"queue {_queue(link)}")
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
