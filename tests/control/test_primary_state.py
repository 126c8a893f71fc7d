"""What a script reads about the election from the Controller itself (docs/control.md): `is_primary`,
`primary_present` and `primary_election_id`, as the switch reports them over the stream. Before,
`primary_present` and `primary_election_id` were only on `ctl.client` (AttributeError on `ctl`)."""

from __future__ import annotations

import time

from p4netem.control import Controller
from p4netem.lab import SwitchProcess


def test_a_backup_reads_whether_a_primary_is_present_from_the_controller(bare_switch: SwitchProcess) -> None:
    addr = bare_switch.grpc_addr
    primary = Controller.connect(addr, election_id=9)
    backup = Controller.connect(addr, election_id=4)
    reader = Controller.connect(addr, primary=False)
    try:
        assert (primary.is_primary, primary.primary_present, primary.primary_election_id) == (True, True, 9)
        assert (backup.is_primary, backup.primary_present, backup.primary_election_id) == (False, True, 9)
        # A read-only connection has no stream: the switch tells it nothing.
        assert (reader.is_primary, reader.primary_present, reader.primary_election_id) == (False, None, None)

        primary.close()  # the primary leaves: nobody is promoted, the backup is told
        deadline = time.monotonic() + 10
        while backup.primary_present is not False and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backup.primary_present is False and not backup.is_primary
        backup.reconnect(election_id=10)  # what the docs tell a backup to do
        assert (backup.is_primary, backup.primary_present, backup.primary_election_id) == (True, True, 10)
    finally:
        for ctl in (primary, backup, reader):
            ctl.close()
