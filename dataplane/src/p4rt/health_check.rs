//! The standard gRPC health service (grpc.health.v1.Health, Check and Watch; `tonic-health`) on
//! the P4Runtime server, with its address, TLS and limits: a prober (`p4netem switch`'s systemd
//! watchdog, grpc_health_probe, a load balancer or Kubernetes' gRPC probe) learns whether the
//! switch forwards, not only whether its gRPC server answers.
//!
//! Services "" (the switch) and "p4.v1.P4Runtime" are SERVING while every data-plane thread's
//! heartbeat is fresh and NOT_SERVING while one is older than `--heartbeat-timeout-ms`
//! (health.rs `Health::stall`): a data-plane loop that is deadlocked, spins inside one turn or is
//! stopped, while the server still answers. A task on the server's runtime looks every
//! `LOOK_EVERY` and sets the status only when it changes (Watch streams send changes only), logging
//! each change. Without a data plane to watch (`ServerConfig::health` None) both stay SERVING.

use std::sync::Arc;
use std::time::Duration;

use tonic::server::NamedService;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::dataplane::monotonic_ns;
use crate::health::{Health, Stall};

use super::proto::p4::v1::p4_runtime_server::P4RuntimeServer;
use super::server::Service;

/// How often the heartbeats are looked at: a stall is reported at most this long after it passes
/// the timeout.
pub const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The services whose status is reported: the whole server ("") and P4Runtime.
fn services() -> [&'static str; 2] {
    ["", <P4RuntimeServer<Service> as NamedService>::NAME]
}

/// What the heartbeats say: SERVING, or NOT_SERVING with the stalled thread.
fn status(health: &Health) -> (ServingStatus, Option<Stall>) {
    match health.stall(monotonic_ns()) {
        None => (ServingStatus::Serving, None),
        Some(stall) => (ServingStatus::NotServing, Some(stall)),
    }
}

/// The health service to add to the server, with its statuses set from the heartbeats now, and the
/// task that keeps them (None without a data plane); the caller aborts the task when it stops serving.
pub async fn service(
    health: Option<Arc<Health>>,
) -> (HealthServer<impl tonic_health::pb::health_server::Health>, Option<tokio::task::JoinHandle<()>>) {
    let (reporter, server) = tonic_health::server::health_reporter();
    let first = health.as_deref().map_or(ServingStatus::Serving, |h| status(h).0);
    set(&reporter, first).await;
    let task = health.map(|h| tokio::spawn(watch(reporter, h, first)));
    (server, task)
}

async fn set(reporter: &HealthReporter, status: ServingStatus) {
    for name in services() {
        reporter.set_service_status(name, status).await;
    }
}

async fn watch(reporter: HealthReporter, health: Arc<Health>, mut last: ServingStatus) {
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (now, stall) = status(&health);
        if now == last {
            continue;
        }
        match stall {
            Some(Stall { thread, age_ns }) => tracing::error!(
                "{thread} has not run for {:.1} s (--heartbeat-timeout-ms {}): gRPC health NOT_SERVING",
                age_ns as f64 / 1e9,
                health.heartbeat_timeout_ns.load(std::sync::atomic::Ordering::Relaxed) / 1_000_000
            ),
            None => tracing::info!("every data-plane thread runs again: gRPC health SERVING"),
        }
        set(&reporter, now).await;
        last = now;
    }
}
