"""What the benchmarks ask of the switch's control plane, over P4Runtime with the project's client
(`p4netem.p4rt`). One class so that the measurements name intents (impair profile 1 uplink, count
classifier entries) instead of table and action names.
"""
from __future__ import annotations

import time

import grpc
from p4netem import pipeline as pl
from p4netem.p4rt import P4Info, P4RuntimeClient, Ternary, WriteError, update
from p4netem.paths import p4info_path
from p4netem.stats import PdCounters, read_pd_counters

PROFILE = 1


class Control:
    client_name = "p4netem.p4rt.P4RuntimeClient (grpcio, upb protobuf)"

    def __init__(self, grpc_addr: str, device_id: int):
        self.client = P4RuntimeClient(grpc_addr, device_id=device_id)
        self._impaired: set[int] = set()

    def start(self) -> None:
        """Connect, become primary, push the pipeline and map port 1 <-> 2 (no classifier entries:
        every packet gets the default profile, which has no impairment)."""
        c = self.client.connect()
        if not c.is_primary:
            raise RuntimeError("bench client did not become primary")
        c.set_pipeline(P4Info.load(p4info_path()))
        c.insert(
            c.table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 1}, pl.SET_EGRESS_PORT,
                          {"port": 2}),
            c.table_entry(pl.PORT_MAP, {"standard_metadata.ingress_port": 2}, pl.SET_EGRESS_PORT,
                          {"port": 1}),
        )

    def close(self) -> None:
        self.client.close()

    def classify_by_ingress_port(self) -> None:
        """Port 1 -> profile 1 uplink, port 2 -> profile 1 downlink."""
        c = self.client
        c.insert(*(c.table_entry(pl.CLASSIFIER, {"standard_metadata.ingress_port": Ternary(port, 0x1FF)},
                                 pl.SET_PROFILE,
                                 {"profile_id": PROFILE, "direction": direction, "ue_id": 0},
                                 priority=10)
                   for port, direction in ((1, pl.UPLINK), (2, pl.DOWNLINK))))

    def set_impairment(self, profile: int, direction: int, **params: int) -> None:
        """Set the whole impairment of (profile, direction); parameters not named are 0 (off). Waits
        until packets admitted under the previous parameters have left (the longest of them is the
        delay line), so one measurement does not see the last one's traffic."""
        c = self.client
        entry = c.table_entry(pl.PROFILE, {"meta.profile_id": profile, "meta.direction": direction},
                              pl.SET_IMPAIRMENT, pl.impairment_params(**params))
        key = pl.pd_index(profile, direction)
        if key in self._impaired:
            c.modify(entry)
        else:
            try:
                c.insert(entry)
            except WriteError as err:
                if not any(e.code == grpc.StatusCode.ALREADY_EXISTS for e in err.errors) and \
                        err.code != grpc.StatusCode.ALREADY_EXISTS:
                    raise
                c.modify(entry)
            self._impaired.add(key)
        self.wait_idle(profile, direction)

    def counters(self, profile: int, direction: int) -> PdCounters:
        return read_pd_counters(self.client, pl.pd_index(profile, direction))

    def wait_idle(self, profile: int, direction: int, timeout: float = 5.0) -> None:
        """Until nothing of (profile, direction) is held in the switch (conservation gap 0)."""
        deadline = time.monotonic() + timeout
        while self.counters(profile, direction).conservation_gap() > 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"profile {profile}/{direction} still holds packets after {timeout} s")
            time.sleep(0.05)

    def loss_random_drops(self, profile: int, direction: int) -> int:
        return self.counters(profile, direction).drops[pl.DropReason.LOSS_RANDOM]

    # ---- bulk classifier writes (p4rt_writes) ---------------------------------------------------

    def _classifier_entry(self, e: dict, with_action: bool):
        c = self.client
        return c.table_entry(
            pl.CLASSIFIER, {"meta.ipv4_src": Ternary(*e["ipv4_src"])},
            pl.SET_PROFILE if with_action else None,
            {"profile_id": e["profile_id"], "direction": e["direction"], "ue_id": e["ue_id"]}
            if with_action else None,
            priority=e["priority"])

    def insert_classifier_batch(self, entries: list[dict]) -> float:
        """One Write RPC inserting `entries`; returns the seconds spent inside the RPC."""
        updates = [update("INSERT", self._classifier_entry(e, True)) for e in entries]
        t0 = time.perf_counter()
        self.client.write(updates)
        return time.perf_counter() - t0

    def modify_classifier(self, e: dict) -> None:
        """One Write RPC modifying one classifier entry's action."""
        self.client.write([update("MODIFY", self._classifier_entry(e, True))])

    def delete_classifier_batch(self, entries: list[dict]) -> None:
        self.client.write([update("DELETE", self._classifier_entry(e, False)) for e in entries])

    def classifier_count(self) -> int:
        return len(self.client.read_table_entries(pl.CLASSIFIER))
