"""Where the HTTP/1.x loader sends a host's next request (web/loaders/http1.choose_connection):
the policy on its own, with connections reduced to what it reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from p4netem_studies.web.loaders.http1 import OPEN, choose_connection


@dataclass
class Conn:
    name: str
    served: int = 0                 # requests it has carried
    outstanding: int = 0            # requests waiting for their response
    closing: bool = False
    assigned: list = field(default_factory=list)

    def __post_init__(self):
        self.assigned = [None] * self.outstanding
        self.total_assigned = self.served + self.outstanding

    def capacity(self) -> bool:
        return not self.closing and not self.assigned


def test_a_first_request_takes_an_idle_connection_before_opening_one():
    used = Conn("used", served=3)
    assert choose_connection([used], retry=False, can_open=True, pipelining=False) is used
    busy = Conn("busy", served=1, outstanding=1)
    assert choose_connection([busy], retry=False, can_open=True, pipelining=False) is OPEN
    assert choose_connection([busy], retry=False, can_open=False, pipelining=False) is None


def test_a_retry_skips_connections_that_sat_idle_after_serving():
    """The E5 GPRS failures: six keep-alive connections idle since the same moment, closed by
    nginx's keep-alive timeout together, their FINs queued behind the downlink's data; every
    retry went to the next stale one until the retries ran out."""
    stale = [Conn(f"stale{i}", served=2) for i in range(3)]
    assert choose_connection(stale, retry=True, can_open=True, pipelining=False) is OPEN
    fresh = Conn("fresh")                       # opened, nothing sent on it yet
    assert choose_connection(stale + [fresh], retry=True, can_open=True,
                             pipelining=False) is fresh
    # Nothing new may open: a used idle connection is still better than waiting forever.
    assert choose_connection(stale, retry=True, can_open=False, pipelining=False) is stale[0]


def test_pipelining_queues_on_the_least_loaded_connection_when_none_may_open():
    class Deep(Conn):
        def capacity(self) -> bool:             # pipelining: no depth limit
            return not self.closing

    a, b = Deep("a", served=1, outstanding=3), Deep("b", served=1, outstanding=1)
    assert choose_connection([a, b], retry=False, can_open=False, pipelining=True) is b
