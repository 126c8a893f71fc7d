"""How a P4Runtime client connects: through a Capabilities call that waits for the channel, not
grpc.channel_ready_future, whose connectivity-polling thread ticks every 0.2 s and had to be waited
out before every close (a closed channel under it prints a traceback): each CLI command and each
controller a script opened paid about 0.13-0.19 s for it."""

from __future__ import annotations

import pytest

from p4netem.lab import SwitchProcess
from p4netem.p4rt import P4RuntimeClient, P4RuntimeError


def _polling(client: P4RuntimeClient) -> bool:
    """Whether grpc's connectivity-polling thread runs for the client's channel (grpc's private
    state, as the client's own close reads it: its absence fails here rather than passing)."""
    state = client._channel._connectivity_state
    return state.polling


def test_connect_leaves_no_connectivity_poller_and_a_missing_server_is_named(bare_switch: SwitchProcess,
                                                                            capfd) -> None:
    client = P4RuntimeClient(bare_switch.grpc_addr, election_id=7).connect()
    try:
        assert client.is_primary
        assert not _polling(client)
    finally:
        client.close()
    reader = P4RuntimeClient(bare_switch.grpc_addr).connect(arbitrate=False)
    reader.fetch_pipeline()  # a channel opened without a stream serves reads
    reader.close()
    assert "Cannot monitor channel state" not in capfd.readouterr().err
    with pytest.raises(P4RuntimeError, match=r"no P4Runtime server answers at 127\.0\.0\.1:1 .* after 0\.5 s"):
        P4RuntimeClient("127.0.0.1:1", connect_timeout=0.5).connect()
