"""Waiting a moment for the primary role, rather than failing at once.

Another live controller mostly holds the role only while it writes: `p4netem web` for each write
(milliseconds, webapp/session.py), a CLI write command from its arbitration to its exit. A script's
command that meets one of them is refused though the same command a moment later works. So a
controller that asks for the role may try again, until a deadline, while the role is taken by a
live controller:
- our election id is used by another live controller: the switch refuses the arbitration
  (p4netem-switch: "election id 1 is already used by another controller ..."; PI/bmv2: "Election
  id already exists"), and the refused stream is ended by the switch;
- a higher election id is primary and we are a backup. Targets that promote the highest live
  controller when the primary leaves (PI/bmv2) then make us primary. p4netem-switch keeps the
  highest id it has seen (P4Runtime): once that controller has gone, our id is below it, which no
  wait changes, and the wait ends there.
Nothing else is waited on (a bad request, a wrong pipeline; an unreachable switch has its own
connect timeout). Between attempts the waiting controller holds no stream: a backup's stream with
our election id would keep another controller with that id out, and the holder is never slowed by
more than one arbitration per attempt. Attempts back off from FIRST_PAUSE_S, doubling, to
MAX_PAUSE_S: a role held for a write is taken within tens of milliseconds of its release, and a
role that stays taken costs the switch about four arbitrations a second.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the command line's options: no grpc at start-up
    from ..p4rt.errors import P4RuntimeError

# Says once per wait, at INFO, that it waits and why: the command line shows it on stderr (as
# cargo says "Blocking waiting for file lock"), so a pause of a few seconds is not a mystery.
log = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.02
MAX_PAUSE_S = 0.25
# The most a wait may be: a day (as MAX_TIMEOUT_S of the client).
MAX_WAIT_S = 86400.0

# The defaults. A CLI write command (`p4netem --primary-wait`): the role is held by a web write
# for milliseconds, by a CLI write command (`apply`) from its arbitration to its exit for 23-36 ms
# (measured on the 2-core machine; 27-94 ms with two CPU hogs beside it); 5 s covers a long run of
# those back to back, or a slower command (a big trace load, a `switch --apply` start-up), and a
# role that stays taken (a timeline playing, a higher election id) is still reported within 5 s.
# A web write (`p4netem web --primary-wait`): an HTTP request should not hang for long; 2 s still
# covers a CLI command's hold twenty times over. The API's default is 0: no wait unless asked.
CLI_WAIT_S = 5.0
WEB_WAIT_S = 2.0
# The most the web's option allows: every write waits behind the one that waits.
MAX_WEB_WAIT_S = 60.0


def check_wait(name: str, value: object) -> float:
    """A wait argument, checked before anything is opened: ValueError naming it and the range."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 <= value <= MAX_WAIT_S:  # NaN fails the comparison too
        raise ValueError(f"{name}: {value!r} out of range; allowed a number of seconds >= 0 and <= {MAX_WAIT_S:g} "
                         "(0: no wait)")
    return float(value)


def election_id_in_use(err: P4RuntimeError) -> bool:
    """Whether an arbitration was refused because a live controller has our election id (not
    another INVALID_ARGUMENT, such as an unknown role)."""
    return err.code.name == "INVALID_ARGUMENT" and "already" in err.message.lower()


class RoleWait:
    """One wait for the role: its deadline and back-off."""

    def __init__(self, wait: float):
        self.wait = wait
        self.start = time.monotonic()
        self.deadline = self.start + wait
        self.step = FIRST_PAUSE_S
        self.announced = False

    @property
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def pause(self, reason: str) -> bool:
        """Sleep the next back-off step (never past the deadline); False, without sleeping, when
        the wait is over. `reason`: why the role was not ours (logged on the first pause)."""
        left = self.left
        if left <= 0:
            return False
        if not self.announced:
            self.announced = True
            log.info("waiting up to %g s for the primary role: %s", self.wait, reason)
        time.sleep(min(self.step, left))
        self.step = min(self.step * 2, MAX_PAUSE_S)
        return True

    def note(self) -> str:
        """What a failure after this wait appends to its message ("" when there was no wait)."""
        if self.wait <= 0:
            return ""
        return f"; waited {self.waited:.1f} s for the primary role"

    @property
    def waited(self) -> float:
        return time.monotonic() - self.start
