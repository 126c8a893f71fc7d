//! `--metrics-addr`: the switch's health (health.rs) as OpenMetrics text on GET /metrics, with
//! prometheus-client, served by axum on the P4Runtime server's tokio runtime. Read-only and off
//! by default; like the gRPC port it should stay on loopback or a management network.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::health::Health;
use crate::release::Slack;

#[derive(Debug)]
struct HealthCollector(Arc<Health>);

impl Collector for HealthCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let h = &self.0;
        let counter =
            |encoder: &mut DescriptorEncoder, name: &str, help: &str, v: f64| -> Result<(), std::fmt::Error> {
                let c = ConstCounter::new(v);
                c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)
            };
        let gauge = |encoder: &mut DescriptorEncoder, name: &str, help: &str, v: f64| -> Result<(), std::fmt::Error> {
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
        };
        counter(
            &mut encoder,
            "p4netem_switch_uptime_seconds",
            "Seconds since the switch started (rate of the busy counter over this is the busy fraction)",
            h.started.elapsed().as_secs_f64(),
        )?;
        counter(&mut encoder, "p4netem_switch_dataplane_busy_seconds",
                "Time the data-plane loop spent in turns with work (packets or timers); its rate is the loop's busy fraction",
                h.dataplane_busy_ns.load(Ordering::Relaxed) as f64 / 1e9)?;
        counter(
            &mut encoder,
            "p4netem_switch_dataplane_busy_turns",
            "Data-plane loop turns that had work",
            h.dataplane_busy_turns.load(Ordering::Relaxed) as f64,
        )?;
        gauge(
            &mut encoder,
            "p4netem_switch_held_packets",
            "Packets the switch holds now: delay line (rate, delay, slot, trace), bearer queues, TX backlogs",
            h.held_packets.load(Ordering::Relaxed) as f64,
        )?;
        gauge(&mut encoder, "p4netem_switch_wake_margin_seconds",
              "How long before its next release the data-plane loop stops sleeping and spins (learnt from its wake-ups' lateness)",
              h.wake_margin_ns.load(Ordering::Relaxed) as f64 / 1e9)?;
        counter(&mut encoder, "p4netem_switch_spin_budget_exhausted",
                "100 ms windows in which the data-plane loop stopped spinning before releases, so that the kernel's RT throttling would not stop it (it slept until each release instead)",
                h.spin_budget_exhausted.load(Ordering::Relaxed) as f64)?;
        gauge(&mut encoder, "p4netem_switch_release_slack_seconds",
              "How late a packet queued behind another in a rate queue may leave (--release-slack-us; 0: every release precise)",
              h.release_slack.get().map_or(0, |s| s.ns()) as f64 / 1e9)?;
        gauge(&mut encoder, "p4netem_switch_release_slack_auto",
              "1: --release-slack-us auto, the slack applies only to links that serve 32 frames within it; 0: to every queued packet",
              (h.release_slack.get() == Some(&Slack::Auto)) as u8 as f64)?;
        if let Some(&us) = h.cpu_latency_us.get() {
            gauge(
                &mut encoder,
                "p4netem_switch_cpu_latency_request_seconds",
                "CPU wake-up latency the switch holds as a PM QoS request (--cpu-latency-us); absent: none held",
                us as f64 / 1e6,
            )?;
        }
        gauge(
            &mut encoder,
            "p4netem_switch_free_buffers",
            "Free packet buffers now",
            h.free_buffers.load(Ordering::Relaxed) as f64,
        )?;
        gauge(
            &mut encoder,
            "p4netem_switch_buffers",
            "Packet buffers in all (--buffers)",
            h.buffers.load(Ordering::Relaxed) as f64,
        )?;
        for (name, help, get) in [
            (
                "p4netem_switch_kernel_rx_packets",
                "Frames the kernel put in a port's receive ring",
                (|p: &crate::health::PortHealth| p.kernel_rx.load(Ordering::Relaxed))
                    as fn(&crate::health::PortHealth) -> u64,
            ),
            (
                "p4netem_switch_ring_drops",
                "Frames the kernel dropped because a port's receive ring was full (the switch never saw them)",
                |p| p.ring_drops.load(Ordering::Relaxed),
            ),
        ] {
            let probe = ConstCounter::new(0u64);
            let mut family = encoder.encode_descriptor(name, help, None, probe.metric_type())?;
            for p in &h.ports {
                let labels = [("port", p.number.to_string()), ("iface", p.ifname.clone())];
                ConstCounter::new(get(p)).encode(family.encode_family(&labels)?)?;
            }
        }
        // Which packet path each port runs on: a gauge at 1 with the path as a label (as *_info
        // metrics do), so a scrape or `p4netem web`'s /api/health shows a fallback.
        let probe = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "p4netem_switch_port_io",
            "Packet I/O path of a port (label io: af_xdp or af_packet); always 1",
            None,
            probe.metric_type(),
        )?;
        for p in &h.ports {
            let labels = [("port", p.number.to_string()), ("iface", p.ifname.clone()), ("io", p.io().to_string())];
            ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "p4netem_switch_port_up",
            "1: the port's interface is there, up and has a carrier; 0: it is down, or gone (deleted or moved to \
             another namespace: the port is opened again when an interface of its name is back)",
            None,
            probe.metric_type(),
        )?;
        for p in &h.ports {
            let labels = [("port", p.number.to_string()), ("iface", p.ifname.clone())];
            ConstGauge::new(p.up.load(Ordering::Relaxed) as i64).encode(family.encode_family(&labels)?)?;
        }
        // The kernel fast path: its state as a label (as port_io), and what it forwarded.
        let state = h.fast_path.get().map_or("off: not started", String::as_str);
        let probe = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "p4netem_switch_fast_path",
            "Kernel fast path (XDP flow cache) of unimpaired flows (label state: on, or off and why); always 1",
            None,
            probe.metric_type(),
        )?;
        ConstGauge::new(1i64).encode(family.encode_family(&[("state", state.to_string())])?)?;
        let (bytes, packets) = h.fast_counts.get().map_or((0, 0), |c| c.total());
        counter(
            &mut encoder,
            "p4netem_switch_fast_path_packets",
            "Packets the kernel fast path forwarded (also counted in profile_in and profile_out)",
            packets as f64,
        )?;
        counter(&mut encoder, "p4netem_switch_fast_path_bytes", "Bytes the kernel fast path forwarded", bytes as f64)?;
        counter(
            &mut encoder,
            "p4netem_switch_fast_path_installs",
            "Flow-cache entries the data plane installed",
            h.fast_installs.load(Ordering::Relaxed) as f64,
        )?;
        // Each data-plane thread's heartbeat (health.rs): one older than the timeout below is what
        // the gRPC health service answers NOT_SERVING for (docs/prometheus-alerts.yml compares each
        // thread's age with it).
        let now = crate::dataplane::monotonic_ns();
        let probe = ConstGauge::new(0.0);
        let mut family = encoder.encode_descriptor(
            "p4netem_switch_heartbeat_age_seconds",
            "Time since a data-plane thread's loop last turned (label thread: dataplane, or tx with the port of a \
             --tx-threads thread); above p4netem_switch_heartbeat_timeout_seconds the thread is stalled and the gRPC \
             health service answers NOT_SERVING",
            None,
            probe.metric_type(),
        )?;
        for (port, age_ns) in h.heartbeats(now) {
            let age = ConstGauge::new(age_ns as f64 / 1e9);
            match port {
                None => age.encode(family.encode_family(&[("thread", "dataplane".to_string())])?)?,
                Some(p) => {
                    let labels =
                        [("thread", "tx".to_string()), ("port", p.number.to_string()), ("iface", p.ifname.clone())];
                    age.encode(family.encode_family(&labels)?)?
                }
            }
        }
        gauge(
            &mut encoder,
            "p4netem_switch_heartbeat_timeout_seconds",
            "A data-plane thread whose heartbeat is older than this is stalled (--heartbeat-timeout-ms)",
            h.heartbeat_timeout_ns.load(Ordering::Relaxed) as f64 / 1e9,
        )?;
        counter(
            &mut encoder,
            "p4netem_switch_p4runtime_tls_handshake_failures",
            "TLS handshakes on the P4Runtime port that failed (each logged with its peer and reason, rate-limited)",
            h.tls_handshake_failures.load(Ordering::Relaxed) as f64,
        )?;
        counter(
            &mut encoder,
            "p4netem_switch_p4runtime_tls_handshakes_evicted",
            "Of the failed TLS handshakes, those closed unfinished to admit a new connection: \
             --grpc-max-pending-handshakes were in progress",
            h.tls_handshakes_evicted.load(Ordering::Relaxed) as f64,
        )?;
        let family = encoder.encode_descriptor(
            "p4netem_switch_p4runtime_request_seconds",
            "Time the P4Runtime server took to answer a request, by RPC",
            None,
            h.p4rt_seconds.metric_type(),
        )?;
        h.p4rt_seconds.encode(family)
    }
}

/// The registry of one switch's health.
pub fn registry(health: Arc<Health>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(HealthCollector(health)));
    registry
}

pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// Bind `addr` now (an address in use fails the start, before the ports open).
pub fn bind(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr).with_context(|| format!("metrics address {addr}"))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serve GET /metrics on `listener` until the runtime stops.
pub async fn serve(listener: std::net::TcpListener, health: Arc<Health>) -> anyhow::Result<()> {
    let registry = Arc::new(registry(health));
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
                    render(&registry),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::from_std(listener)?;
    axum::serve(listener, app).await.context("metrics server")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Rpc;

    #[test]
    fn health_renders_as_openmetrics() {
        let h = Arc::new(Health::new([(1, "veth1".to_string(), "af_xdp")]));
        h.busy_turn(1_500_000_000);
        h.port_stats(0, 100, 3);
        h.observe_rpc(Rpc::Write, std::time::Instant::now());
        let text = render(&registry(h.clone()));
        assert!(text.contains("p4netem_switch_dataplane_busy_seconds_total 1.5"), "{text}");
        assert!(text.contains("p4netem_switch_ring_drops_total{port=\"1\",iface=\"veth1\"} 3"), "{text}");
        assert!(text.contains("p4netem_switch_p4runtime_request_seconds_count{rpc=\"Write\"} 1"), "{text}");
        assert!(text.contains("p4netem_switch_port_io{port=\"1\",iface=\"veth1\",io=\"af_xdp\"} 1"), "{text}");
        assert!(text.contains("p4netem_switch_port_up{port=\"1\",iface=\"veth1\"} 1"), "{text}");
        h.ports[0].up.store(false, Ordering::Relaxed);
        h.ports[0].set_io("af_packet");
        let text = render(&registry(h));
        assert!(text.contains("p4netem_switch_port_up{port=\"1\",iface=\"veth1\"} 0"), "{text}");
        assert!(text.contains("p4netem_switch_port_io{port=\"1\",iface=\"veth1\",io=\"af_packet\"} 1"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
