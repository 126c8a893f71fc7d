"""Lab tokens: what makes a lab's names (`p4n<token>h1`, `p4n<token>p12`) its own.

A token is the pid of the process that made it, then a counter of that process, each in base 36
with a fixed number of digits. Two live processes have two pids, so never one token; and all
tokens have the same length, so none begins another, and a name made from one token never begins
with another token. Widths that varied (a base-36 pid, then a counter of any width) gave pid 100's
37th lab (`2s` `10`) and pid 3601's first (`2s1` `0`) the same token `2s10`, which the second lab
of pid 100 (`2s1`) begins: a sweep by prefix of a dead lab removed live labs' namespaces.

Widths: 5 digits hold any Linux pid (PID_MAX_LIMIT is 2^22 = 4194304 on 64-bit, below 36^5), and
3 give a process 46656 labs; 8 characters keep the longest interface name made from a token,
`p4n<token>p<port>` of a Mininet lab with 509 ports, at 3 + 8 + 1 + 3 = 15, Linux's limit.
"""

from __future__ import annotations

PREFIX = "p4n"                # of every lab name, before the token
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
PID_DIGITS = 5
COUNTER_DIGITS = 3
LENGTH = PID_DIGITS + COUNTER_DIGITS
PID_MAX_LIMIT = 1 << 22       # the kernel's ceiling for /proc/sys/kernel/pid_max (64-bit)
COUNTER_LIMIT = len(DIGITS) ** COUNTER_DIGITS


def base36(n: int, width: int) -> str:
    """`n` in base 36, zero-padded to `width` digits; ValueError when it needs more."""
    if not 0 <= n < len(DIGITS) ** width:
        raise ValueError(f"{n} does not fit in {width} base-36 digits")
    out = ""
    for _ in range(width):
        n, r = divmod(n, len(DIGITS))
        out = DIGITS[r] + out
    return out


def make(pid: int, n: int) -> str:
    """The token of process `pid`'s lab number `n` (0 <= n < COUNTER_LIMIT)."""
    if not 0 < pid <= PID_MAX_LIMIT:
        raise ValueError(f"pid {pid} is not a Linux pid (1 to {PID_MAX_LIMIT})")
    if not 0 <= n < COUNTER_LIMIT:
        raise ValueError(f"lab number {n} is out of range (0 to {COUNTER_LIMIT - 1})")
    return base36(pid, PID_DIGITS) + base36(n, COUNTER_DIGITS)


def is_token(text: str) -> bool:
    """Whether `text` is a token as make() writes them (the right length and digits, a pid in
    range): only then is a name beginning with it that token's and no other's."""
    if len(text) != LENGTH or any(c not in DIGITS for c in text):
        return False
    return 0 < pid_of(text) <= PID_MAX_LIMIT


def pid_of(token: str) -> int:
    """The pid of the process that made `token` (is_token(token) must hold)."""
    return int(token[:PID_DIGITS], 36)
