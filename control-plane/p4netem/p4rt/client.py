"""A thin, typed P4Runtime client.

One client = one gRPC channel + one StreamChannel to one device, with client arbitration (device id,
election id, role). A background thread reads the stream and sorts what arrives (arbitration answers,
packet-ins, digest lists, stream errors) into queues. Unary RPCs (Write, Read, pipeline config) are
plain blocking calls. Every failure raises P4RuntimeError (or its WriteError subclass) carrying the
gRPC status code.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from .encoding import Value, decode, encode
from .entries import (
    MatchSpec,
    TableEntryView,
    as_entity,
    build_counter_entry,
    build_register_entry,
    build_table_entry,
    decode_table_entry,
    update,
)
from .errors import P4RuntimeError, WriteError, status_code_from_int
from .p4info import P4Info
from .proto import p4runtime_pb2
from .tls import GrpcTls

# After .proto: the generated stub module imports p4.v1.p4runtime_pb2, which is now our fast one.
from p4.v1.p4runtime_pb2_grpc import P4RuntimeStub  # noqa: E402  isort: skip

log = logging.getLogger(__name__)

# How long close() waits for gRPC to wind the channel down. grpc's Channel.close waits for the
# channel's calls to finish; a call cut off halfway (an exception a signal handler raised into
# it, as a lab process told to stop gets) may never finish, and close() would wait forever.
CLOSE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int


@dataclass(frozen=True)
class PacketIn:
    payload: bytes
    metadata: dict[str, int]


@dataclass(frozen=True)
class Digest:
    """One digest list from the switch, decoded: `data` holds one dict per digest message."""

    name: str
    digest_id: int
    list_id: int
    data: list[dict[str, int]]
    timestamp: int


# P4Info, big batches and reads exceed gRPC's 4 MiB message default (the switch's own cap,
# p4netem-switch --grpc-max-message-bytes, is 32 MiB by default; a client limit above it only
# means the switch, not we, refuses an oversized request). A failed Write carries one
# p4.v1.Error per update in a trailer (grpc-status-details-bin), which gRPC core limits to 8 KiB
# (soft: larger ones are refused at random) and 16 KiB (hard): about 400 updates of a batch with
# one failure. Both limits are raised together, to what a 256 MiB batch's details can take
# (docs/p4runtime.md, "Large batches", says what other clients must set).
METADATA_LIMIT = 64 << 20
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    ("grpc.max_send_message_length", 256 << 20),
    ("grpc.max_metadata_size", METADATA_LIMIT),
    ("grpc.absolute_max_metadata_size", METADATA_LIMIT),
    # One connection per client, as separate controller processes have: grpcio otherwise shares one
    # HTTP/2 connection between every channel of the process to the same address, each client's
    # stream holds one of the switch's 64 streams per connection, and from the 64th client on every
    # call of every client in the process waits for a stream (DEADLINE_EXCEEDED).
    ("grpc.use_local_subchannel_pool", 1),
]


def keepalive_options(keepalive_s: float | None) -> list[tuple[str, int]]:
    """Channel options for HTTP/2 keepalive (none when keepalive_s is None): a PING every
    keepalive_s, also with no call open (the web server's read-only connection is idle between
    refreshes, and a frozen switch must be found before the next request waits on it), with no
    cap on PINGs between data frames (grpc's default, 2, stops them on an idle connection), and
    the connection dropped when a PING is not acknowledged within 2 * keepalive_s. grpc 1.85
    times a PING out after grpc.http2.ping_timeout_ms (1 minute by default), not after
    grpc.keepalive_timeout_ms alone: both are set. p4netem-switch (tonic over h2) answers PINGs and
    has no ping-rate policy (no GOAWAY "too_many_pings", as grpc's own servers send)."""
    if keepalive_s is None:
        return []
    every_ms = max(1, round(keepalive_s * 1000))
    return [
        ("grpc.keepalive_time_ms", every_ms),
        ("grpc.keepalive_timeout_ms", 2 * every_ms),
        ("grpc.http2.ping_timeout_ms", 2 * every_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _wait_connectivity_polling(channel: grpc.Channel, timeout_s: float = 0.5) -> None:
    """Wait (at most `timeout_s`) until grpc's connectivity-polling thread, which
    channel_ready_future starts, has noticed that nobody waits any more and stopped (it checks
    every 0.2 s). Closing the channel under it makes that thread die with a traceback on stderr
    ("ValueError: Cannot monitor channel state: Channel closed!"), e.g. after every connection
    attempt to a switch that is not there."""
    state = getattr(channel, "_connectivity_state", None)  # grpc's, private: best effort
    deadline = time.monotonic() + timeout_s
    while getattr(state, "polling", False) and time.monotonic() < deadline:
        time.sleep(0.01)


def _close_channel(channel: grpc.Channel, timeout_s: float) -> bool:
    """Close `channel` from a daemon thread and wait at most `timeout_s`; False (and a warning)
    when it did not finish: the channel is then left to the process's exit."""
    _wait_connectivity_polling(channel)
    closer = threading.Thread(target=channel.close, name="p4rt-close", daemon=True)
    closer.start()
    closer.join(timeout_s)
    if closer.is_alive():
        log.warning("P4Runtime channel did not close in %.0f s; leaving it to the process's exit",
                    timeout_s)
        return False
    return True


def _check_election_id(value: object) -> int:
    """The election id, checked before anything uses it: ValueError naming the allowed range."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**128:
        raise ValueError(f"election id {value!r} out of range 0..{2**128 - 1} (P4Runtime's uint128)")
    return value


def _check_device_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise ValueError(f"device id {value!r} out of range 0..{2**64 - 1} (P4Runtime's uint64)")
    return value


# The most a timeout may be: a day, more than any call or connection needs (float("inf") raised
# OverflowError from the time module inside grpc's wait).
MAX_TIMEOUT_S = 86400.0


def _check_seconds(name: str, value: object, *, none_means: str | None = None) -> float | None:
    """A timeout argument, checked before a channel is opened: ValueError naming the argument and
    the allowed range (a str raised TypeError inside grpc's wait, a negative or zero one was
    "no P4Runtime server answers ... after -1 s" at once, NaN waited for ever). None is allowed
    where `none_means` says what it stands for."""
    if value is None and none_means is not None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 < value <= MAX_TIMEOUT_S:  # NaN fails the comparison too
        allowed = f"a number of seconds > 0 and <= {MAX_TIMEOUT_S:g}"
        if none_means is not None:
            allowed += f", or None ({none_means})"
        raise ValueError(f"{name}: {value!r} out of range; allowed {allowed}")
    return float(value)


def _closed_under_call(err: ValueError, what: str) -> P4RuntimeError:
    """grpc raises ValueError ("Cannot invoke RPC: Channel closed!"), not an RpcError, for a call
    on a channel another thread closed meanwhile (a reconnection): the same UNAVAILABLE as a
    connection lost, so callers retry or report it like one."""
    if "closed" not in str(err).lower():
        raise err
    return P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"{what}: the connection was closed meanwhile ({err})")


def _uint128(value: int) -> p4runtime_pb2.Uint128:
    value = _check_election_id(value)
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & (2**64 - 1))


class P4RuntimeClient:
    """Client of one P4Runtime device.

    Usage:
        with P4RuntimeClient("127.0.0.1:9559", device_id=1) as client:
            client.set_pipeline(P4Info.load("p4src/p4netem.p4info.txtpb"))
            client.insert_table_entry("P4netemIngress.port_map", {"standard_metadata.ingress_port": 1},
                                      "P4netemIngress.set_egress_port", {"port": 2})
    """

    def __init__(
        self,
        address: str = "127.0.0.1:9559",
        device_id: int = 1,
        election_id: int = 1,
        role: str = "",
        p4info: P4Info | None = None,
        timeout: float = 10.0,
        tls: GrpcTls | None = None,
        connect_timeout: float | None = None,
        keepalive_s: float | None = None,
    ):
        """`tls`: how to secure the channel; None reads it from the environment (P4NETEM_GRPC_CA,
        ..._CERT, ..._KEY: see p4netem.p4rt.tls), plaintext when that names nothing. `timeout` is
        each call's deadline; `connect_timeout` how long a (re)connection waits for the switch
        (None: `timeout`), shorter where a missing switch must be found out fast (the web server).
        `keepalive_s` (None: off): an HTTP/2 PING every keepalive_s seconds, also while no call
        is open, and the connection lost when one is not answered within 2 * keepalive_s: a switch
        frozen with the connection open (SIGSTOP, a hung host) is found out within about
        3 * keepalive_s instead of a call's deadline (keepalive_options)."""
        self.address = address
        self.tls = tls if tls is not None else GrpcTls.from_env()
        # Checked here, not at the first request that carries them (a channel and a stream
        # thread would be open by then).
        self.device_id = _check_device_id(device_id)
        self.election_id = _check_election_id(election_id)
        self.timeout = _check_seconds("timeout", timeout)
        self.connect_timeout = _check_seconds("connect_timeout", connect_timeout, none_means="the timeout")
        self.keepalive_s = _check_seconds("keepalive_s", keepalive_s, none_means="no keepalive")
        self.role = role
        self.p4info = p4info
        self.is_primary = False
        # Where registers are read and written when the switch's P4Runtime server does not
        # implement them (bmv2_registers.Bmv2RuntimeCli); None: over P4Runtime.
        self.register_backend = None
        # Highest election id the device reported for our (device, role) in its last arbitration
        # answer (the primary's, or the highest ever seen when there is none); None if unknown.
        self.primary_election_id: int | None = None
        # Whether the device has a primary for our (device, role), from its last arbitration
        # message to us (NOT_FOUND: none, e.g. after the primary left); None before any.
        self.primary_present: bool | None = None
        self._channel: grpc.Channel | None = None
        self._stub: P4RuntimeStub | None = None
        self._requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self._arbitration: queue.Queue[p4runtime_pb2.MasterArbitrationUpdate | P4RuntimeError] = queue.Queue()
        self._packets: queue.Queue[p4runtime_pb2.PacketIn] = queue.Queue()
        self._digests: queue.Queue[p4runtime_pb2.DigestList] = queue.Queue()
        self._stream_errors: queue.Queue[p4runtime_pb2.StreamError] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._stream_call: Any = None  # the StreamChannel call (release() cancels it if need be)
        self._closing = threading.Event()
        self.stream_failure: P4RuntimeError | None = None
        # Whether connect() opens the stream and arbitrates: what reconnect() does again, also
        # after a reconnection that failed (the switch still down) left nothing open.
        self.arbitrating: bool | None = None
        # Counts successful connections: a caller that saw a call fail can tell whether another
        # thread has reconnected since (then it retries rather than reconnecting again).
        self.generation = 0

    # ---- connection and arbitration -------------------------------------------------------------

    def connect(self, timeout: float | None = None, arbitrate: bool = True) -> P4RuntimeClient:
        """Open the channel and the stream, and run arbitration. Raises if the device does not answer
        or rejects the arbitration; a non-primary (backup) client connects with is_primary False.

        With arbitrate=False only the channel is opened (no stream): enough for Read and
        GetForwardingPipelineConfig, which need no election id, and it never disturbs the controllers
        that hold the device."""
        if timeout is None:
            timeout = self.timeout if self.connect_timeout is None else self.connect_timeout
        else:
            _check_seconds("timeout", timeout)
        self.arbitrating = arbitrate
        self._closing.clear()
        self.stream_failure = None
        options = CHANNEL_OPTIONS + keepalive_options(self.keepalive_s)
        if self.tls is None:
            self._channel = grpc.insecure_channel(self.address, options=options)
        else:
            self._channel = grpc.secure_channel(self.address, self.tls.credentials(),
                                                options=options + self.tls.channel_options())
        self._stub = P4RuntimeStub(self._channel)
        if not self._wait_ready(timeout):
            self._channel.close()
            self._channel = None
            self._stub = None
            # gRPC does not say why a channel never became ready; with TLS a refused handshake
            # (wrong CA, no or unknown client certificate, plaintext server, a switch certificate
            # that does not name the host connected to) is the usual cause.
            how = (f" over {self.tls.describe()} (or the handshake failed: check --grpc-ca, --grpc-cert, "
                   "--grpc-key, and that the switch's certificate names the host, else --grpc-server-name)"
                   ) if self.tls else " over plaintext (a TLS server does not answer it)"
            raise P4RuntimeError(
                grpc.StatusCode.UNAVAILABLE, f"no P4Runtime server answers at {self.address}{how} after {timeout:g} s"
            ) from None
        if not arbitrate:
            self.generation += 1
            return self
        try:
            self.open_stream(timeout=timeout)
        except BaseException:
            self.close()
            raise
        self.generation += 1
        return self

    def open_stream(self, timeout: float | None = None) -> bool:
        """Open the StreamChannel on the open channel and arbitrate with this client's election id;
        returns is_primary. With release(), a client holds the primary role only while it writes
        (the web server): between the two the switch does not know this controller at all, so
        another one with the same election id can write. A refused arbitration (the election id
        is used by a live controller) raises, and leaves the channel as it was, without a stream."""
        if self._stub is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "client is not connected")
        if self._reader is not None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "a stream is already open: release() it first")
        self.arbitrating = True
        self.stream_failure = None
        self._requests = queue.Queue()
        self._arbitration = queue.Queue()
        self._stream_call = self._stub.StreamChannel(self._request_iterator(self._requests))
        self._reader = threading.Thread(target=self._read_stream, args=(self._stream_call,), daemon=True,
                                        name="p4rt-stream")
        self._reader.start()
        try:
            return self.arbitrate(timeout=timeout)
        except BaseException:
            # No answer (a switch that stopped answering) or a refusal: nothing to wait for.
            self.release(timeout=0)
            raise

    def release(self, timeout: float | None = None) -> bool:
        """Close the stream, keep the channel: the switch forgets this controller (a primary leaves
        the group without one, P4Runtime's rule; the next controller whose election id is at least
        the highest ever seen becomes primary by asking). The stream is half-closed and the switch
        ends it once it has removed the controller (p4netem-switch: dataplane/src/p4rt/server.rs,
        stream_closed before the response stream ends), so on return another controller can take
        the same election id. A server that does not end the stream within `timeout` (None: the
        connect timeout) has it cancelled (returns False: the switch learns it from the
        RST_STREAM, a moment later). Reads go on; a write is PERMISSION_DENIED until open_stream()."""
        if timeout is None:
            timeout = self.timeout if self.connect_timeout is None else self.connect_timeout
        reader, call = self._reader, self._stream_call
        self._closing.set()  # the stream's end is ours, not a failure
        self._requests.put(None)
        ended = True
        if reader is not None:
            reader.join(timeout)
            if reader.is_alive():
                ended = False
                if call is not None:
                    call.cancel()
                reader.join(CLOSE_TIMEOUT_S)
        self._reader = None
        self._stream_call = None
        self._closing.clear()
        self.stream_failure = None
        self.arbitrating = False
        self.is_primary = False
        self.primary_present = None  # no stream: the switch tells us nothing any more
        return ended

    def _wait_ready(self, timeout: float) -> bool:
        """Whether a server answers on the channel within `timeout`: a Capabilities call that waits
        for the channel to connect (wait_for_ready). Not grpc.channel_ready_future: its
        connectivity-polling thread wakes every 0.2 s, and closing the channel under it prints a
        traceback, so every close had to wait for it (about 0.13 s per client: per CLI command,
        per controller a script opens). Any answer counts, an error too (a server without
        Capabilities says UNIMPLEMENTED): only a deadline or an unreachable server do not."""
        try:
            self._stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=timeout, wait_for_ready=True)
        except grpc.RpcError as err:
            return err.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
        return True

    def answers(self, timeout: float) -> bool:
        """Whether the server answers a Capabilities call within `timeout` (any answer counts, as
        in connect()): a liveness probe, e.g. before `p4netem switch` tells systemd's watchdog
        that the switch is alive. False when not connected."""
        return self._stub is not None and self._wait_ready(timeout)

    def health(self, service: str = "", timeout: float | None = None) -> str:
        """The server's gRPC health (grpc.health.v1 Check) of `service`, as its status name: "" is the
        switch as a whole, "p4.v1.P4Runtime" its P4Runtime service. p4netem-switch answers "SERVING"
        while every data-plane thread runs and "NOT_SERVING" while one has stalled (docs/dataplane.md,
        "Health"). Raises P4RuntimeError when it does not answer; UNIMPLEMENTED from a server without
        the health service (a switch built before it), NOT_FOUND for a service it does not know."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc  # grpcio-health-checking; only probes need it

        if self._channel is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "client is not connected")
        timeout = self.timeout if timeout is None else _check_seconds("timeout", timeout)
        try:
            reply = health_pb2_grpc.HealthStub(self._channel).Check(health_pb2.HealthCheckRequest(service=service),
                                                                    timeout=timeout)
        except grpc.RpcError as err:
            raise P4RuntimeError.from_rpc_error(err, "health check failed") from None
        except ValueError as err:
            raise _closed_under_call(err, "health check failed") from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    @property
    def connected(self) -> bool:
        """True while the channel is open and, if a stream was opened, the stream is alive."""
        if self._channel is None:
            return False
        if self._reader is not None and (self.stream_failure is not None or not self._reader.is_alive()):
            return False
        return True

    def reconnect(self, timeout: float | None = None, election_id: int | None = None) -> P4RuntimeClient:
        """Close whatever is left of the connection and connect again, re-running arbitration with
        this client's election id (or a new one). Used after the switch restarted or the stream
        broke; the caller decides when to retry its own requests."""
        if election_id is not None:
            _check_election_id(election_id)
        if timeout is not None:
            _check_seconds("timeout", timeout)
        arbitrate = self.arbitrating if self.arbitrating is not None else (
            self._reader is not None or self.stream_failure is not None)
        self.close()
        if election_id is not None:
            self.election_id = election_id
        return self.connect(timeout=timeout, arbitrate=arbitrate)

    def arbitrate(self, election_id: int | None = None, timeout: float | None = None) -> bool:
        """Send a MasterArbitrationUpdate (optionally with a new election id); returns is_primary."""
        if election_id is not None:
            self.election_id = _check_election_id(election_id)
        msg = p4runtime_pb2.StreamMessageRequest()
        arb = msg.arbitration
        arb.device_id = self.device_id
        arb.election_id.CopyFrom(_uint128(self.election_id))
        if self.role:
            arb.role.name = self.role
        # Answers to earlier requests or unsolicited updates (another client became primary) are old news.
        while not self._arbitration.empty():
            self._arbitration.get_nowait()
        self._requests.put(msg)
        try:
            answer = self._arbitration.get(timeout=self.timeout if timeout is None else timeout)
        except queue.Empty:
            raise P4RuntimeError(grpc.StatusCode.DEADLINE_EXCEEDED, "no arbitration answer from the device") from None
        if isinstance(answer, P4RuntimeError):
            raise answer
        code = status_code_from_int(answer.status.code)
        if code not in (grpc.StatusCode.OK, grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.NOT_FOUND):
            raise P4RuntimeError(code, f"arbitration rejected: {answer.status.message}")
        # OK: we are primary. ALREADY_EXISTS / NOT_FOUND: a backup (another primary, or none yet).
        self.is_primary = code == grpc.StatusCode.OK
        self._note_election(answer)
        return self.is_primary

    def _note_election(self, arb: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        self.primary_present = status_code_from_int(arb.status.code) != grpc.StatusCode.NOT_FOUND
        if arb.HasField("election_id"):
            self.primary_election_id = (arb.election_id.high << 64) | arb.election_id.low

    @staticmethod
    def _request_iterator(
        requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None],
    ) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        # Bound to one stream's queue: after a reconnect the old stream's iterator ends on its own.
        while True:
            item = requests.get()
            if item is None:
                return
            yield item

    def _read_stream(self, responses: Iterator[p4runtime_pb2.StreamMessageResponse]) -> None:
        try:
            for msg in responses:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    # The device also sends one when the primary changes; keep is_primary current.
                    self.is_primary = msg.arbitration.status.code == 0
                    self._note_election(msg.arbitration)
                    self._arbitration.put(msg.arbitration)
                elif kind == "packet":
                    self._packets.put(msg.packet)
                elif kind == "digest":
                    self._digests.put(msg.digest)
                elif kind == "error":
                    log.warning("stream error from device: %s", msg.error.message)
                    self._stream_errors.put(msg.error)
        except grpc.RpcError as err:
            if not self._closing.is_set():
                failure = P4RuntimeError.from_rpc_error(err, "P4Runtime stream closed")
                self.stream_failure = failure
                self.is_primary = False
                self._arbitration.put(failure)

    def close(self) -> None:
        self._closing.set()
        self._requests.put(None)
        self.is_primary = False
        if self._channel is not None:
            _close_channel(self._channel, CLOSE_TIMEOUT_S)
            self._channel = None
        self._stub = None
        if self._reader is not None:
            self._reader.join(timeout=2)
            self._reader = None
        self._stream_call = None

    def __enter__(self) -> P4RuntimeClient:
        if self._channel is None:
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stub(self) -> P4RuntimeStub:
        if self._stub is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "client is not connected")
        return self._stub

    @property
    def info(self) -> P4Info:
        if self.p4info is None:
            raise P4RuntimeError(
                grpc.StatusCode.FAILED_PRECONDITION, "no P4Info: call set_pipeline() or fetch_pipeline() first"
            )
        return self.p4info

    # ---- pipeline config --------------------------------------------------------------------------

    def set_pipeline(
        self, p4info: P4Info, device_config: bytes = b"", action: str = "VERIFY_AND_COMMIT", cookie: int = 0
    ) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=self.device_id, role=self.role)
        req.election_id.CopyFrom(_uint128(self.election_id))
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.Action.Value(action)
        req.config.p4info.CopyFrom(p4info.message)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        self._call(self.stub.SetForwardingPipelineConfig, req, "SetForwardingPipelineConfig")
        self.p4info = p4info

    def get_pipeline(self, response_type: str = "ALL") -> tuple[P4Info | None, bytes, int]:
        """(P4Info or None when the device has none, device config, cookie)."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.ResponseType.Value(response_type),
        )
        resp = self._call(self.stub.GetForwardingPipelineConfig, req, "GetForwardingPipelineConfig")
        config = resp.config
        info = P4Info(config.p4info) if config.HasField("p4info") and config.p4info.tables else None
        return info, config.p4_device_config, config.cookie.cookie

    def fetch_pipeline(self) -> P4Info:
        """Adopt the P4Info the device runs."""
        info, _, _ = self.get_pipeline("P4INFO_AND_COOKIE")
        if info is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "the device has no forwarding pipeline")
        self.p4info = info
        return info

    # ---- write ------------------------------------------------------------------------------------

    def write(
        self,
        updates: Iterable[p4runtime_pb2.Update],
        atomicity: str = "CONTINUE_ON_ERROR",
        timeout: float | None = None,
    ) -> None:
        """One WriteRequest with all `updates`. Raises WriteError listing the failed updates."""
        if self.register_backend is not None:
            return self._write_split(list(updates), atomicity, timeout)
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id, role=self.role)
        req.election_id.CopyFrom(_uint128(self.election_id))
        req.atomicity = p4runtime_pb2.WriteRequest.Atomicity.Value(atomicity)
        req.updates.extend(updates)
        if not req.updates:
            return
        try:
            self.stub.Write(req, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as err:
            raise WriteError.from_rpc_error(err, f"Write of {len(req.updates)} update(s) failed") from None
        except ValueError as err:
            closed = _closed_under_call(err, f"Write of {len(req.updates)} update(s) failed")
            raise WriteError(closed.code, closed.message, []) from None

    def _write_split(self, updates: list, atomicity: str, timeout: float | None) -> None:
        """A batch on a switch whose registers go through `register_backend`: the other updates
        over P4Runtime, then the register updates; one WriteError with every failure at its
        position in the batch (CONTINUE_ON_ERROR semantics: the target has nothing stronger for
        registers; Session reverts what was applied when all-or-nothing was asked)."""
        from .bmv2_registers import remap, split_write

        regs, rest = split_write(updates)
        errors = []
        if rest:
            backend, self.register_backend = self.register_backend, None
            try:
                self.write([u for _, u in rest], atomicity=atomicity, timeout=timeout)
            except WriteError as err:
                if not err.errors:
                    raise
                errors += remap(err, [i for i, _ in rest])
            finally:
                self.register_backend = backend
        if regs:
            errors += self.register_backend.write(self.info, regs)
        if errors:
            errors.sort(key=lambda e: e.index)
            raise WriteError(grpc.StatusCode.UNKNOWN, f"Write of {len(updates)} update(s) failed", errors)

    def insert(self, *entities: object) -> None:
        self.write(update("INSERT", e) for e in entities)

    def modify(self, *entities: object) -> None:
        self.write(update("MODIFY", e) for e in entities)

    def delete(self, *entities: object) -> None:
        self.write(update("DELETE", e) for e in entities)

    def table_entry(
        self,
        table: str,
        match: Mapping[str, MatchSpec] | None = None,
        action: str | None = None,
        params: Mapping[str, Value] | None = None,
        priority: int = 0,
        is_default: bool = False,
        controller_metadata: int = 0,
    ) -> p4runtime_pb2.TableEntry:
        """Build a TableEntry by names with this client's P4Info."""
        return build_table_entry(self.info, table, match, action, params, priority, is_default, controller_metadata)

    def insert_table_entry(
        self,
        table: str,
        match: Mapping[str, MatchSpec] | None,
        action: str,
        params: Mapping[str, Value] | None = None,
        priority: int = 0,
    ) -> None:
        self.insert(self.table_entry(table, match, action, params, priority))

    def modify_table_entry(
        self,
        table: str,
        match: Mapping[str, MatchSpec] | None,
        action: str,
        params: Mapping[str, Value] | None = None,
        priority: int = 0,
    ) -> None:
        self.modify(self.table_entry(table, match, action, params, priority))

    def delete_table_entry(self, table: str, match: Mapping[str, MatchSpec] | None, priority: int = 0) -> None:
        self.delete(self.table_entry(table, match, priority=priority))

    def set_default_action(self, table: str, action: str, params: Mapping[str, Value] | None = None) -> None:
        self.modify(self.table_entry(table, action=action, params=params, is_default=True))

    def write_register(self, register: str, index: int, value: Value) -> None:
        self.modify(build_register_entry(self.info, register, index, value))

    def write_counter(self, counter: str, index: int, packets: int = 0, byte_count: int = 0) -> None:
        self.modify(build_counter_entry(self.info, counter, index, packets, byte_count))

    # ---- read -------------------------------------------------------------------------------------

    def read(self, *entities: object, timeout: float | None = None) -> Iterator[p4runtime_pb2.Entity]:
        """Stream the entities matching the given (possibly wildcard) entities."""
        wanted = [as_entity(e) for e in entities]
        if self.register_backend is not None:
            # Registers from the backend (bmv2_registers.py), the rest over P4Runtime.
            regs = [e.register_entry for e in wanted if e.WhichOneof("entity") == "register_entry"]
            if regs:
                yield from self.register_backend.read_many(self.info, regs)
            wanted = [e for e in wanted if e.WhichOneof("entity") != "register_entry"]
            if not wanted:
                return
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id, role=self.role)
        req.entities.extend(wanted)
        try:
            for resp in self.stub.Read(req, timeout=self.timeout if timeout is None else timeout):
                yield from resp.entities
        except grpc.RpcError as err:
            raise P4RuntimeError.from_rpc_error(err, "Read failed") from None
        except ValueError as err:
            raise _closed_under_call(err, "Read failed") from None

    def read_table_entries(self, table: str | None = None, with_counters: bool = False) -> list[TableEntryView]:
        """All entries of `table` (of every table when None), decoded; default entries not included."""
        wildcard = p4runtime_pb2.TableEntry(table_id=self.info.table(table).id if table else 0)
        if with_counters:
            wildcard.counter_data.SetInParent()
        return [decode_table_entry(self.info, e.table_entry) for e in self.read(wildcard)]

    def read_default_entry(self, table: str) -> TableEntryView:
        wildcard = p4runtime_pb2.TableEntry(table_id=self.info.table(table).id, is_default_action=True)
        entries = [decode_table_entry(self.info, e.table_entry) for e in self.read(wildcard)]
        if len(entries) != 1:
            raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"{table}: expected one default entry, got {len(entries)}")
        return entries[0]

    def read_counter(self, counter: str, index: int | None = None) -> dict[int, CounterValue]:
        """index -> (packets, bytes) for one index, or every index when None."""
        result: dict[int, CounterValue] = {}
        for e in self.read(build_counter_entry(self.info, counter, index)):
            c = e.counter_entry
            result[c.index.index] = CounterValue(c.data.packet_count, c.data.byte_count)
        return result

    def read_register(self, register: str, index: int | None = None) -> dict[int, int]:
        """index -> value for one index, or every index when None."""
        result: dict[int, int] = {}
        for e in self.read(build_register_entry(self.info, register, index)):
            r = e.register_entry
            result[r.index.index] = decode(r.data.bitstring)
        return result

    # ---- stream: packet I/O and digests -----------------------------------------------------------

    def send_packet_out(self, payload: bytes, **metadata: Value) -> None:
        """Send a PacketOut; metadata by name of the `packet_out` controller header fields. Fields not
        given are sent as 0 (P4Runtime wants every field present)."""
        header = self.info.controller_header("packet_out")
        unknown = set(metadata) - set(header.metadata)
        if unknown:
            raise P4RuntimeError(
                grpc.StatusCode.NOT_FOUND, f"packet_out has no field {', '.join(sorted(unknown))}"
            )
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.packet.payload = payload
        for name, field in header.metadata.items():
            msg.packet.metadata.add(
                metadata_id=field.id, value=encode(metadata.get(name, 0), field.bitwidth, f"packet_out {name}")
            )
        self._requests.put(msg)

    def get_packet_in(self, timeout: float | None = None) -> PacketIn:
        """Next PacketIn, metadata decoded by name; raises DEADLINE_EXCEEDED when none arrives."""
        try:
            msg = self._packets.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeError(grpc.StatusCode.DEADLINE_EXCEEDED, "no PacketIn arrived in time") from None
        header = self.info.controller_header("packet_in")
        md: dict[str, int] = {}
        for m in msg.metadata:
            field = header.metadata_by_id.get(m.metadata_id)
            md[field.name if field else f"#{m.metadata_id}"] = decode(m.value)
        return PacketIn(msg.payload, md)

    def configure_digest(
        self, digest: str, max_timeout_ns: int = 0, max_list_size: int = 1, ack_timeout_ns: int = 1_000_000_000
    ) -> None:
        """Turn on delivery of a digest (INSERT of its DigestEntry; MODIFY if it exists)."""
        entry = p4runtime_pb2.DigestEntry(digest_id=self.info.digest(digest).id)
        entry.config.max_timeout_ns = max_timeout_ns
        entry.config.max_list_size = max_list_size
        entry.config.ack_timeout_ns = ack_timeout_ns
        try:
            self.insert(entry)
        except WriteError as err:
            if err.code != grpc.StatusCode.ALREADY_EXISTS and not any(
                e.code == grpc.StatusCode.ALREADY_EXISTS for e in err.errors
            ):
                raise
            self.modify(entry)

    def get_digest(self, timeout: float | None = None, ack: bool = True) -> Digest:
        """Next digest list, decoded by field name (and acknowledged unless ack=False)."""
        try:
            msg = self._digests.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeError(grpc.StatusCode.DEADLINE_EXCEEDED, "no digest arrived in time") from None
        info = self.info.digest_by_id(msg.digest_id)
        data = []
        for item in msg.data:
            members = item.struct.members if item.HasField("struct") else [item]
            data.append({name: decode(m.bitstring) for (name, _), m in zip(info.fields, members)})
        if ack:
            self.ack_digest(msg.digest_id, msg.list_id)
        return Digest(info.name, msg.digest_id, msg.list_id, data, msg.timestamp)

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.digest_ack.digest_id = digest_id
        msg.digest_ack.list_id = list_id
        self._requests.put(msg)

    def stream_errors(self) -> list[p4runtime_pb2.StreamError]:
        """StreamErrors received so far (drained)."""
        errors = []
        while True:
            try:
                errors.append(self._stream_errors.get_nowait())
            except queue.Empty:
                return errors

    # ---- helpers ----------------------------------------------------------------------------------

    def _call(self, rpc: Any, request: Any, what: str) -> Any:
        try:
            return rpc(request, timeout=self.timeout)
        except grpc.RpcError as err:
            raise P4RuntimeError.from_rpc_error(err, f"{what} failed") from None
        except ValueError as err:
            raise _closed_under_call(err, f"{what} failed") from None

