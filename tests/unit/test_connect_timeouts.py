"""`Controller.connect`'s and the P4Runtime client's timeouts (`timeout`, `connect_timeout`,
`keepalive_s`) are checked as the API's other inputs are (test_api_inputs.py): a value that is not
a number of seconds in range is a ValueError naming the argument and the range, raised before any
connection is opened. Before, a string failed inside grpc's channel_ready_future ("TypeError:
unsupported operand type(s) for +: 'float' and 'str'"), a negative or zero one was UNAVAILABLE "no
P4Runtime server answers ... after -1 s" at once, infinity an OverflowError from the time module and
NaN a wait without end."""

from __future__ import annotations

import math
import threading

import grpc
import pytest

from p4netem.control import Controller
from p4netem.p4rt import P4RuntimeClient, P4RuntimeError

RANGE = r"allowed a number of seconds > 0 and <= 86400"


@pytest.mark.parametrize("argument", ["timeout", "connect_timeout", "keepalive_s"])
@pytest.mark.parametrize("value", ["5", -1, 0, math.nan, math.inf, 1e9, True, [2]])
def test_a_bad_timeout_names_the_argument_before_a_connection_is_opened(argument, value):
    before = {t.ident for t in threading.enumerate()}
    # Nothing listens on port 1: a check after the first attempt would fail with UNAVAILABLE instead.
    with pytest.raises(ValueError) as info:
        Controller.connect("127.0.0.1:1", **{argument: value})
    message = str(info.value)
    assert message.startswith(f"{argument}: {value!r} out of range; {RANGE}"), message
    if argument != "timeout":
        assert message.endswith(")") and "or None (" in message, message  # None is allowed there
    assert {t.ident for t in threading.enumerate()} <= before


def test_the_client_checks_the_timeouts_of_connect_and_reconnect():
    client = P4RuntimeClient("127.0.0.1:1", timeout=3)
    for call in (lambda: client.connect(timeout="2"), lambda: client.reconnect(timeout=-2)):
        with pytest.raises(ValueError, match=rf"timeout: .* out of range; {RANGE}"):
            call()
    assert client.timeout == 3.0 and client._channel is None


def test_good_timeouts_connect_as_before():
    # An int is seconds too, and connect_timeout=None is the timeout's: no switch here, so UNAVAILABLE
    # after the connect timeout (0.3 s), not an input error.
    for kwargs in ({"timeout": 1, "connect_timeout": 0.3}, {"timeout": 0.3, "connect_timeout": None},
                   {"timeout": 5, "connect_timeout": 0.3, "keepalive_s": 1}):
        with pytest.raises(P4RuntimeError) as info:
            Controller.connect("127.0.0.1:1", **kwargs)
        assert info.value.code == grpc.StatusCode.UNAVAILABLE and "after 0.3 s" in info.value.message, info.value
