"""Run a plan: bring up the lab, start the endpoints, load the page under every condition, measure,
and tear everything down (also on Ctrl-C or a failure).

For each load: the client's capture starts, the loader runs in the client namespace, the capture
stops, and one `RunRecord` holds the loader's own figures (elapsed time, browser onload, objects,
connections, ALPN, TLS version, request header bytes) next to the capture's (first SYN to last
server packet, first SYN to SYN-ACK, packets and bytes per direction, connections opened and used,
retransmissions) and what the radio did (idled, pre-woken, promotions and state changes the
switch saw: radio.py).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from p4netem.stop_signals import check_pending

from ..mininet.slots import AppliedProfile
from ..mininet.topology import load_topology
from ..web.capture import Capture, read_pcap
from ..web.load import run_loader
from .endpoints import Endpoints, SiteContent
from .metrics import WireMetrics, silence_understates, wire_metrics
from .plan import Condition, Plan, resolve_profile
from .protocols import APACHE_PLAIN, protocol
from .provenance import command_line, loadavg, run_context
from .radio import RadioLog, RadioPrep, prepare_radio, wake_exchange
from .tcp import environment, set_initial_windows, tune_hosts


@dataclass
class RunRecord:
    condition: Condition
    rep: int
    t_wall: float
    ok: bool
    errors: list[str]
    loader_elapsed_ms: float | None
    onload_ms: float | None
    wire: WireMetrics
    objects: int
    objects_ok: int
    loader_connections: int
    alpn: list[str]
    tls_versions: list[str]
    request_header_bytes: int | None
    base_rtt_ms: float
    radio: dict = field(default_factory=dict)
    dns_lookups: int = 0
    dns_ms_max: float | None = None        # longest name lookup of the load
    settle_s: float | None = None          # wait after the load until the link was quiet

    @property
    def plt_ms(self) -> float | None:
        return self.wire.plt_ms

    @property
    def handshake_excess_ms(self) -> float | None:
        """First SYN to SYN-ACK beyond the profile's base RTT: a radio wake-up shows here."""
        s = self.wire.first_syn_to_synack_ms
        return None if s is None else s - self.base_rtt_ms

    def row(self) -> dict:
        """One flat CSV row."""
        c = self.condition
        row = {"key": c.key, "profile": c.profile, "radio": c.radio,
               "profile_label": c.profile_label, "protocol": c.protocol, "tls": c.tls,
               "initcwnd": c.initcwnd, "page": c.page, "conns_per_host": c.conns_per_host,
               "variant": c.variant, "rep": self.rep, "t_wall": round(self.t_wall, 3),
               "ok": self.ok, "plt_ms": _r(self.plt_ms),
               "loader_elapsed_ms": _r(self.loader_elapsed_ms), "onload_ms": _r(self.onload_ms)}
        row.update({k: (_r(v) if isinstance(v, float) else v)
                    for k, v in self.wire.to_json().items() if k != "plt_ms"})
        row.update({"handshake_excess_ms": _r(self.handshake_excess_ms),
                    "base_rtt_ms": _r(self.base_rtt_ms),
                    "objects": self.objects, "objects_ok": self.objects_ok,
                    "loader_connections": self.loader_connections,
                    "alpn": " ".join(self.alpn), "tls_versions": " ".join(self.tls_versions),
                    "request_header_bytes": self.request_header_bytes,
                    "dns_lookups": self.dns_lookups, "dns_ms_max": _r(self.dns_ms_max),
                    "settle_s": _r(self.settle_s),
                    "radio_model": self.radio.get("model"),
                    "radio_applied": self.radio.get("applied"),
                    "radio_idle": self.radio.get("idle"),
                    "radio_promotion_s": self.radio.get("promotion_s"),
                    "radio_prewake": self.radio.get("prewake"),
                    "radio_prewake_ms": self.radio.get("prewake_ms"),
                    "radio_promotions": self.radio.get("promotions"),
                    "radio_wake_ms": _r(self.radio.get("wake_ms")),
                    "errors": " | ".join(self.errors)[:2000]})
        return row

    def to_json(self) -> dict:
        d = self.row()
        d["condition"] = self.condition.to_json()
        d["wire"] = self.wire.to_json()
        d["radio"] = self.radio
        d["errors"] = self.errors
        return d


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


Event = Callable[[str, dict], None]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _server_complaints(path: Path, since: int) -> list[str]:
    """nginx's error-log lines written after byte `since` that say why a connection or request
    ended early (timeouts, resets, refusals), without their timestamps and repeats."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read(1 << 20).decode(errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for line in text.splitlines():
        if any(w in line for w in ("timed out", "closed", "reset", "exceeded", "refused", "[error]",
                                   "[crit]")):
            msg = line.split("] ", 1)[-1]
            msg = msg.split(": ", 1)[-1] if msg[:1].isdigit() else msg
            if msg not in out:
                out.append(msg)
    return out


class PageloadLab:
    """One lab for a plan's page loads, loaded one job at a time: `start()` generates the pages and
    brings up the lab, its servers and the TCP settings; `run(cond, rep)` applies the condition's
    profile and initial window when they differ from the last load's, loads the page once and
    returns its record; `close()` tears it all down. The serial `Runner` and the parallel and
    distributed runners (p4netem_studies.runs) share it, so a load is the same wherever it runs.

    `index` places the lab's addresses in a subnet of their own (Topology.relocated) so that labs
    running side by side never share an address; `switch_args` are extra flags of the switch (a
    lab that shares the machine runs it without busy polling: runs.lab_options)."""

    def __init__(self, plan: Plan, out_dir: str | Path, *, target: str = "p4netem",
                 keep_pcaps: bool = False, on_event: Event | None = None,
                 mininet_log: str = "warning", log_dir: str | Path | None = None,
                 index: int = 0, switch_args: tuple[str, ...] = ()):
        self.plan = plan
        self.out_dir = Path(out_dir)
        self.target = target
        self.keep_pcaps = keep_pcaps
        self.on_event = on_event or (lambda kind, data: None)
        self.mininet_log = mininet_log
        self.log_dir = Path(log_dir) if log_dir else self.out_dir / "logs"
        self.index = index
        self.switch_args = tuple(switch_args)
        self.metadata: dict = {}
        self.profiles_applied: list[dict] = []
        self.tcp_states: dict[int, dict] = {}
        self.lab = None
        self._stack: ExitStack | None = None
        self._work: Path | None = None
        self._current_profile = None
        self._applied: AppliedProfile | None = None
        self._current_iw = None
        self._radio_log: RadioLog | None = None
        self._t_start = 0.0

    def start(self) -> "PageloadLab":
        plan = self.plan
        self._t_start = time.time()
        self._work = Path(tempfile.mkdtemp(prefix="p4n-run-"))
        self.pcap_dir = self.out_dir / "pcaps" if self.keep_pcaps else self._work / "pcaps"
        self.pcap_dir.mkdir(parents=True, exist_ok=True)
        self._stack = ExitStack()
        try:
            self.on_event("stage", {"text": "generating pages"})
            # The pages and their certificate are made while the lab comes up: they share
            # nothing until the servers start, and the certificate's RSA key alone takes a second
            # on a busy machine (its generation runs outside the GIL), the lab about as long.
            with ThreadPoolExecutor(max_workers=1) as pool:
                content = pool.submit(SiteContent.generate, plan.pages, self._work / "content",
                                      seed=plan.seed)
                topo = load_topology(plan.topology).expand(plan.topology_params).relocated(self.index)
                self.on_event("stage", {"text": f"starting the {topo.name} lab"})
                from ..mininet.lab import MininetLab   # Mininet only when a lab really runs
                self.lab = self._stack.enter_context(MininetLab(
                    topo, target=self.target, log_dir=self.log_dir, seed=plan.seed,
                    mininet_log=self.mininet_log, switch_args=self.switch_args))
                self.content = content.result()
            if self.lab.record is not None:
                self.lab.record.add_dir(self._work)  # removed by `lab clean` if this process is killed
            self.on_event("lab", {"lab": self.lab})
            self.on_event("stage", {"text": "starting servers"})
            # node-spdy servers only where a condition loads over SPDY: each warms up before
            # it listens (web/spdy-server.js), a second or so of CPU that other plans need not pay.
            self.endpoints = self._stack.enter_context(Endpoints(
                self.lab, self.content, gzip=plan.gzip, dns=plan.dns,
                spdy=any(c.protocol == "spdy" for c in plan.conditions),
                               buffering=any(c.server_buffering for c in plan.conditions),
                workdir=self._work / "endpoints",
                send_timeout_s=max(60, int(plan.timeout_s))))
            self.metadata = self._metadata(self.lab, self.endpoints, self.content)
            self.metadata["tcp_sysctls_set"] = tune_hosts(self.lab, plan.congestion_control,
                                                          plan.client_rmem)
            if plan.dns_latency_ms:
                self.lab.set_dns_latency(int(plan.dns_latency_ms * 1e6))
            self._radio_log = RadioLog(self.lab)
        except BaseException:
            self.close()
            raise
        return self

    def run(self, cond: Condition, rep: int, *, pcap: Path | None = None,
            seed: int | None = None) -> RunRecord:
        """One load of `cond` (repetition `rep`). With `seed`, the switch's random number
        generator is reseeded first, so a load's losses and jitter depend on its own seed, not on
        what ran before it in this lab (a resumed or parallel run draws the same numbers)."""
        plan, lab = self.plan, self.lab
        assert lab is not None and self._radio_log is not None, "start() the lab first"
        if (cond.profile, cond.radio) != self._current_profile:
            profile = resolve_profile(cond.profile)
            # Every client's link gets the profile; the record (and the radio idled before
            # each load) is the loading client's.
            slot = lab.topology.host(plan.client or lab.topology.clients[0].name).slot
            self._applied = next(r for r in lab.apply_profile(profile, radio=cond.radio)
                                 if r.slot == slot)
            self._current_profile = (cond.profile, cond.radio)
            self.profiles_applied.append(self._applied.to_json())
            self.on_event("profile", {"condition": cond, "applied": self._applied})
        if cond.initcwnd != self._current_iw:
            set_initial_windows(lab, cond.initcwnd)
            self._current_iw = cond.initcwnd
            if cond.initcwnd not in self.tcp_states:
                self.tcp_states[cond.initcwnd] = environment(lab)
        applied = self._applied
        assert applied is not None
        if seed is not None and self.target == "p4netem":
            from p4netem import pipeline as pl
            lab.client.write_register(pl.RNG_SEED, 0, seed & 0xFFFFFFFFFFFFFFFF)
        wake = None
        if cond.prewake:
            wake = wake_exchange(lab, self.content.manifests[cond.page].hosts[0] if plan.dns else None)
        prep = prepare_radio(lab, applied, client=plan.client, wake=wake)
        pcap = pcap or self.pcap_dir / f"{_safe(cond.key)}-{rep}.pcap"
        rec = self._load_once(lab, self.endpoints, self.content, cond, rep, applied, prep,
                              self._radio_log, pcap)
        # The next load starts on an idle link: nothing held in the switch (a slow link can
        # still be serialising retransmissions of this load) and nothing new for three RTTs.
        rec.settle_s = lab.wait_quiet(max(0.3, 3 * rec.base_rtt_ms / 1000.0),
                                      timeout_s=plan.timeout_s)
        return rec

    def close(self) -> None:
        """Tear the lab down (idempotent); the metadata gets the end state first."""
        if self.lab is not None and "tcp_environment_end" not in self.metadata:
            try:
                self.metadata["tcp_environment_end"] = environment(self.lab)
                self.metadata["server_logs"] = self._server_log_summary(self.endpoints)
            except Exception:        # a broken lab still comes down
                pass
        try:
            if self._stack is not None:
                self._stack.close()
        finally:
            self._stack = None
            self.metadata["duration_s"] = round(time.time() - self._t_start, 1)
            if self._work is not None:
                shutil.rmtree(self._work, ignore_errors=True)
                self._work = None

    def finish_metadata(self) -> dict:
        self.metadata["profiles_applied"] = self.profiles_applied
        self.metadata["tcp_environment_by_initcwnd"] = self.tcp_states
        self.metadata.setdefault("host", {})["loadavg_end"] = loadavg()
        return self.metadata

    def _load_once(self, lab, endpoints: Endpoints, content: SiteContent, cond: Condition,
                   rep: int, applied: AppliedProfile, prep: RadioPrep, radio_log: RadioLog,
                   pcap: Path) -> RunRecord:
        plan = self.plan
        proto = protocol(cond.protocol)
        client = plan.client or lab.topology.clients[0].name
        ns = lab.ns(client)
        cert = content.cert
        resolve = {} if plan.dns else endpoints.resolve_map(cond.page)
        extra: list[str] = []
        if proto.loader.startswith("h1"):
            extra += ["--conns-per-host", str(cond.conns_per_host or proto.conns_per_host)]
        extra += [f"--browser-arg={a}" for a in proto.browser_args]
        if plan.revalidate:
            extra.append("--revalidate")
        extra += list(cond.loader_args)      # the condition's own client options (experiments)
        errors: list[str] = []
        t_wall = time.time()
        log_marks = {h: _size(srv.error_log) for h, srv in endpoints.nginx.items()}
        cap = Capture(ns, "eth0", pcap, "tcp or udp port 53")
        try:
            radio_log.begin(applied)
            report = run_loader(ns, proto.loader, content.paths[cond.page], resolve=resolve,
                                scheme="https" if cond.tls else "http",
                                port=APACHE_PLAIN if cond.server_buffering else proto.port(cond.tls),
                                ca_file=str(cert.ca_cert), timeout_s=plan.timeout_s,
                                spki=[cert.spki_sha256] if proto.browser else None,
                                dns=plan.dns, extra_args=extra)
        except RuntimeError as exc:
            report = {"ok": False, "errors": [str(exc)]}
        finally:
            cap.stop()
        if dropped := cap.dropped_by_kernel:
            errors.append(f"the capture lost {dropped} packets (dropped by the kernel "
                          "before tcpdump read them): its figures would undercount the load")
        seen = radio_log.end()
        wire = wire_metrics(read_pcap(pcap), lab.ip(client), plan.silence_s,
                            initcwnd=cond.initcwnd)
        if not self.keep_pcaps:
            pcap.unlink(missing_ok=True)
        errors += [str(e) for e in report.get("errors", [])][:20]
        if report.get("ok") and (cut := silence_understates(wire.plt_ms, wire.silence_cut,
                                                            report.get("elapsed_ms"), plan.silence_s)):
            errors.append(cut)
        if not report.get("ok"):
            # Why a server closed a connection is only in its own log (e.g. nginx's send_timeout
            # on a link slower than its timers): keep what it said during this load.
            errors += [f"{h}: {line}" for h, srv in endpoints.nginx.items()
                       for line in _server_complaints(srv.error_log, log_marks.get(h, 0))][:10]
        conns = report.get("connections", [])
        alpn = sorted({c.get("alpn") or "-" for c in conns}) if conns else []
        expected = proto.expected_alpn(cond.tls)
        if proto.browser:
            protos = sorted({o.get("protocol") or "-" for o in report.get("objects", [])})
            alpn = protos
            if report.get("ok") and protos != [expected or "http/1.1"]:
                errors.append(f"browser used {protos}, expected {expected or 'http/1.1'}")
        elif report.get("ok") and conns and alpn != [expected or "-"]:
            errors.append(f"ALPN {alpn}, expected {expected}")
        tls_versions = sorted({c.get("tls_version") for c in conns if c.get("tls_version")})
        objs = report.get("objects", [])
        header_bytes = [o.get("request_header_bytes") for o in objs]
        profile = applied.profile
        base_rtt_ms = (int(profile.uplink.delay) + int(profile.downlink.delay)) / 1e6
        radio = applied.radio.to_json()
        radio.update(prep.to_json())
        radio.update(seen)
        lookups = [d for d in (report.get("dns") or {}).values() if d.get("t_done") is not None]
        return RunRecord(
            condition=cond, rep=rep, t_wall=t_wall, ok=bool(report.get("ok")) and not errors,
            errors=errors, loader_elapsed_ms=report.get("elapsed_ms"),
            onload_ms=report.get("onload_ms"), wire=wire, objects=len(objs),
            objects_ok=sum(1 for o in objs if o.get("t_done") is not None and not o.get("error")),
            loader_connections=len(conns), alpn=alpn, tls_versions=tls_versions,
            request_header_bytes=(sum(header_bytes) if header_bytes and
                                  all(isinstance(b, int) for b in header_bytes) else None),
            base_rtt_ms=base_rtt_ms, radio=radio, dns_lookups=len(lookups),
            dns_ms_max=max((d["t_done"] - d["t_start"] for d in lookups), default=None))

    # ---- metadata ------------------------------------------------------------------------------
    def _metadata(self, lab, endpoints: Endpoints, content: SiteContent) -> dict:
        return {
            **run_context(self.plan.to_json(), self.target, lab),
            "software": {**endpoints.versions(), "node": command_line(["node", "--version"]),
                         "chromium": command_line(["/usr/bin/chromium", "--version"]),
                         "openssl": command_line(["openssl", "version"])},
            "pages": {name: {"objects": len(m.objects), "hosts": list(m.hosts),
                             "total_bytes": m.total_bytes, "seed": m.seed}
                      for name, m in content.manifests.items()},
            # Which conditions' HTTP/1.x came from the buffering server (Apache, web/apache.py).
            "server_output_buffering": [c.key for c in self.plan.conditions if c.server_buffering],
            # How long a server waits on a response it cannot write (nginx send_timeout, Apache
            # Timeout): the load's timeout, so that only the link decides how long a load takes.
            "server_send_timeout_s": endpoints.send_timeout_s,
            "tls": {"certificate_key": content.cert.key_type if content.cert else None,
                    "server_protocols": "TLSv1.2 TLSv1.3", "session_resumption": False},
        }

    def _server_log_summary(self, endpoints: Endpoints) -> dict:
        summary = {}
        for host, srv in endpoints.nginx.items():
            rows = srv.requests()
            summary[host] = {"requests": len(rows),
                             "tls": sorted({r.get("tls") for r in rows if r.get("tls")}),
                             "alpn": sorted({r.get("alpn") for r in rows if r.get("alpn")})}
        return summary


def _safe(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)[:120]


def pcap_name(index: int) -> str:
    """The capture of the `index`th load of a `measure` run, in OUT/pcaps (--keep-pcaps)."""
    return f"{index:04d}.pcap"


class Runner:
    """A plan's loads one after the other in one lab (`p4netem measure`)."""

    def __init__(self, plan: Plan, out_dir: str | Path, *, target: str = "p4netem",
                 keep_pcaps: bool = False, on_event: Event | None = None,
                 mininet_log: str = "warning"):
        self.plan = plan
        self.records: list[RunRecord] = []
        self.interrupted = False
        self.session = PageloadLab(plan, out_dir, target=target, keep_pcaps=keep_pcaps,
                                   on_event=on_event, mininet_log=mininet_log)
        self.on_event = self.session.on_event

    @property
    def metadata(self) -> dict:
        return self.session.metadata

    def run(self) -> list[RunRecord]:
        self.session.out_dir.mkdir(parents=True, exist_ok=True)
        schedule = self.plan.schedule()
        try:
            self.session.start()
            for index, (cond, rep) in enumerate(schedule):
                # A SIGTERM Python dropped during the lab's start or the last load (cli.signals).
                check_pending()
                self.on_event("load", {"index": index, "total": len(schedule),
                                       "condition": cond, "rep": rep})
                rec = self.session.run(cond, rep, pcap=self.session.pcap_dir / pcap_name(index))
                self.records.append(rec)
                self.on_event("done", {"index": index, "total": len(schedule), "record": rec})
        except (KeyboardInterrupt, SystemExit):
            self.interrupted = True
            raise
        finally:
            self.session.close()
            self.session.metadata["interrupted"] = self.interrupted
        return self.records

    def finish_metadata(self) -> dict:
        return self.session.finish_metadata()
