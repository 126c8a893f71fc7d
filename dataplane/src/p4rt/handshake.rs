//! The TLS handshakes of the P4Runtime server's incoming connections, and the log of the ones
//! that fail.
//!
//! tonic's own TLS (`Server::tls_config`) reports a failed handshake only as a debug event without
//! the peer, so an operator whose controllers are refused (wrong CA, no or a v1 client
//! certificate, plaintext against a TLS port) saw nothing in the switch's log. Here the accepted
//! TCP connections are handshaken with tokio-rustls (the same library and configuration tonic
//! would use: listen.rs `server_tls`) and the TLS streams handed to tonic's
//! `serve_with_incoming_shutdown`, which then sees the same connections a tonic TLS server would.
//! Each failure is logged at warn with the peer address and rustls's reason, rate-limited.
//!
//! Handshakes run concurrently, each in its own task and within `--grpc-handshake-timeout-ms`
//! ([`Limits`]), so a stalled client holds neither the accept loop nor other clients; at most
//! `--grpc-max-pending-handshakes` are in progress at once, and a connection beyond that closes the
//! oldest ([`accept_loop`] says why). When the server stops accepting (its shutdown signal fired,
//! or it failed) it drops the stream, the accept loop sees that and ends, and dropping its listener
//! and handshake tasks closes the port and the half-open connections, as tonic's TLS incoming does.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_rustls::rustls::{self, AlertDescription, CertificateError, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;
use tonic::transport::server::{Connected, TcpIncoming};

use crate::health::Health;

/// Default `--grpc-handshake-timeout-ms`: how long a client may take from its TCP connect to the
/// end of its TLS handshake (which takes milliseconds): long enough for a loaded machine, short
/// enough that a stalled or slowloris client does not hold a task and a socket for long. tonic's
/// TLS has no timeout by default; nginx's ssl_handshake_timeout is 60 s.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// `--grpc-handshake-timeout-ms` allowed: below 100 ms a handshake over a WAN or on a loaded
/// machine would be cut; above 5 minutes a stalled client holds its socket for nothing.
pub const HANDSHAKE_TIMEOUT_MS_RANGE: RangeInclusive<u64> = 100..=300_000;
/// Default `--grpc-max-pending-handshakes`. A handshake takes milliseconds, so 256 at once is a
/// burst far beyond any set of controllers; each holds a socket and a small task, so 256 keep the
/// switch well inside the usual 1024 open files (ports, pcap files and served connections need
/// theirs) whatever a flood of stalled connections does.
pub const DEFAULT_MAX_PENDING_HANDSHAKES: usize = 256;
/// `--grpc-max-pending-handshakes` allowed.
pub const MAX_PENDING_HANDSHAKES_RANGE: RangeInclusive<usize> = 1..=65_536;

/// At most [`LOG_BURST`] failed handshakes are logged per window ([`DEFAULT_LOG_WINDOW_MS`]); the
/// others of the window are counted and their number logged in one line when it ends. A client
/// that retries (grpc backs off from 1 s) or a handful of misconfigured controllers are logged in
/// full; a port scan or a flood of bad clients costs at most 11 lines per 10 s (about 4000 a hour),
/// not one per connection.
pub const LOG_BURST: u32 = 10;
pub const DEFAULT_LOG_WINDOW_MS: u64 = 10_000;
/// The hidden `--grpc-handshake-log-window-ms` allowed (tests shorten the window so as not to wait
/// 10 s for its summary).
pub const LOG_WINDOW_MS_RANGE: RangeInclusive<u64> = 100..=3_600_000;

/// How the handshakes in progress are bounded, and the window of their failures' log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From the TCP connect to the end of the TLS handshake (`--grpc-handshake-timeout-ms`).
    pub timeout: Duration,
    /// Handshakes in progress at once (`--grpc-max-pending-handshakes`).
    pub max_pending: usize,
    /// The rate limit's window of the failed handshakes' log (`--grpc-handshake-log-window-ms`).
    pub log_window: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(DEFAULT_HANDSHAKE_TIMEOUT_MS),
            max_pending: DEFAULT_MAX_PENDING_HANDSHAKES,
            log_window: Duration::from_millis(DEFAULT_LOG_WINDOW_MS),
        }
    }
}

impl Limits {
    /// Checks each limit against its range; Err names the option.
    pub fn check(&self) -> anyhow::Result<()> {
        let in_ms = |option: &str, d: Duration, range: &RangeInclusive<u64>| {
            let ms = d.as_millis();
            if ms < u128::from(*range.start()) || ms > u128::from(*range.end()) {
                anyhow::bail!("{option} must be in {}..={} (got {ms})", range.start(), range.end());
            }
            Ok(())
        };
        in_ms("--grpc-handshake-timeout-ms", self.timeout, &HANDSHAKE_TIMEOUT_MS_RANGE)?;
        in_ms("--grpc-handshake-log-window-ms", self.log_window, &LOG_WINDOW_MS_RANGE)?;
        if !MAX_PENDING_HANDSHAKES_RANGE.contains(&self.max_pending) {
            anyhow::bail!(
                "--grpc-max-pending-handshakes must be in {}..={} (got {})",
                MAX_PENDING_HANDSHAKES_RANGE.start(),
                MAX_PENDING_HANDSHAKES_RANGE.end(),
                self.max_pending
            );
        }
        Ok(())
    }

    /// What the log says at start.
    pub fn describe(&self) -> String {
        format!(
            "TLS handshakes: each ended after {} (--grpc-handshake-timeout-ms), at most {} in progress \
             (--grpc-max-pending-handshakes; a connection beyond closes the oldest)",
            seconds_or_ms(self.timeout),
            self.max_pending
        )
    }
}

/// The connections whose TLS handshake succeeded (the TCP accept errors passed
/// on, for tonic to handle as it handles them on a plaintext server), from an accept loop
/// running in a task; the loop ends when the stream is dropped. The handle is for aborting the
/// loop when the server ends another way.
pub fn incoming(
    tcp: TcpIncoming,
    config: Arc<ServerConfig>,
    limits: Limits,
    health: Option<Arc<Health>>,
) -> (ReceiverStream<io::Result<Secured>>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(16);
    let failures = Arc::new(FailureLog {
        limit: Mutex::new(RateLimit::new(LOG_BURST, limits.log_window)),
        health,
        summary_wake: Notify::new(),
    });
    let task = tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), limits, tx, failures));
    (ReceiverStream::new(rx), task)
}

/// Why a connection did not become a TLS stream.
#[derive(Debug)]
enum Failure {
    /// Closed (or reset) before sending a byte: a TCP probe (port scan, load-balancer check), not
    /// a handshake. Logged at debug only.
    Silent,
    /// The handshake failed: the reason for the log.
    Handshake(String),
}

/// A connection's arrival number, peer and how its handshake ended.
type Handshaken = (u64, Option<SocketAddr>, Result<TlsStream<TcpStream>, Failure>);

/// A handshake in progress, for closing it when the cap is reached.
struct Pending {
    task: AbortHandle,
    peer: Option<SocketAddr>,
    since: Instant,
}

/// Accepts connections and runs their handshakes, at most `limits.max_pending` at once.
///
/// A connection that arrives with the cap reached closes the oldest handshake in progress, as
/// nginx does when it runs out of connections (it closes the oldest ones still waiting for their
/// first bytes, "worker_connections are not enough, reusing connections"). The alternatives hold a
/// controller out: closing the new connection, as envoy's connection limits and OpenSSH's
/// MaxStartups do, lets a client that opens the cap's worth of idle connections once per timeout
/// (26 a second with the defaults) refuse every controller for good; not accepting (waiting, as
/// nginx does for new connections when it has none to reuse) leaves the controller's connection in
/// the kernel's backlog behind the flood, until the stalled handshakes time out. Evicting the
/// oldest admits a controller at once, and holds it out only if a flood opens the cap's worth of
/// connections within its handshake's milliseconds. The oldest whatever it has sent: a partial
/// ClientHello costs a stalled client no more than silence. Each eviction is a failed handshake
/// (counted, logged under the same rate limit).
async fn accept_loop(
    mut tcp: TcpIncoming,
    acceptor: TlsAcceptor,
    limits: Limits,
    tx: mpsc::Sender<io::Result<Secured>>,
    failures: Arc<FailureLog>,
) {
    let mut handshakes: JoinSet<Handshaken> = JoinSet::new();
    // The handshakes in progress by arrival: the first is the oldest.
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    let mut arrivals: u64 = 0;
    loop {
        let summary_due = failures.summary_due();
        tokio::select! {
            // The server stopped accepting: end, closing the port and the handshakes in progress.
            _ = tx.closed() => break,
            conn = tcp.next() => match conn {
                Some(Ok(stream)) => {
                    while pending.len() >= limits.max_pending {
                        let Some((_, oldest)) = pending.pop_first() else { break };
                        // One that has just ended is not in progress: its result is joined below.
                        if !oldest.task.is_finished() {
                            oldest.task.abort(); // drops its future, closing the connection
                            failures.evicted(oldest.peer, oldest.since.elapsed(), limits.max_pending);
                        }
                    }
                    let (id, acceptor, timeout) = (arrivals, acceptor.clone(), limits.timeout);
                    arrivals += 1;
                    let peer = stream.peer_addr().ok();
                    let task = handshakes.spawn(async move { (id, peer, handshake(&acceptor, stream, timeout).await) });
                    pending.insert(id, Pending { task, peer, since: Instant::now() });
                }
                Some(Err(e)) => {
                    if tx.send(Err(e)).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            Some(done) = handshakes.join_next() => {
                if let Ok((id, _, _)) = &done {
                    pending.remove(id);
                }
                match done {
                    Ok((_, peer, Ok(tls))) => {
                        let watch = Watch { peer, failures: failures.clone(), error: None };
                        let secured = Secured { inner: tls, watch: Some(watch) };
                        if tx.send(Ok(secured)).await.is_err() {
                            break;
                        }
                    }
                    Ok((_, peer, Err(Failure::Silent))) => {
                        tracing::debug!("connection from {} closed before any TLS handshake", show(peer));
                    }
                    Ok((_, peer, Err(Failure::Handshake(reason)))) => failures.failed(peer, &reason),
                    Err(e) if e.is_cancelled() => {} // evicted: reported then
                    Err(e) => {
                        pending.retain(|_, p| p.task.id() != e.id());
                        tracing::warn!("a TLS handshake task ended abnormally: {e}");
                    }
                }
            },
            _ = tokio::time::sleep_until(summary_due.unwrap_or_else(Instant::now)), if summary_due.is_some() => {
                failures.roll(Instant::now());
            }
            // A window began suppressing (maybe in a connection's task): its summary is due.
            _ = failures.summary_wake.notified(), if summary_due.is_none() => {}
        }
    }
}

/// The failed handshakes' log (rate-limited) and count, shared by the accept loop and the
/// connections it hands on (a client may refuse the switch only after the handshake).
#[derive(Debug)]
struct FailureLog {
    limit: Mutex<RateLimit>,
    health: Option<Arc<Health>>,
    /// Wakes the accept loop when a window suppresses its first line, to log the summary at its end.
    summary_wake: Notify,
}

impl FailureLog {
    fn failed(&self, peer: Option<SocketAddr>, reason: &str) {
        self.record(|| format!("TLS handshake from {} failed: {reason}", show(peer)));
    }

    /// A handshake closed unfinished to admit a new connection (the cap was reached).
    fn evicted(&self, peer: Option<SocketAddr>, age: Duration, cap: usize) {
        if let Some(h) = &self.health {
            h.tls_handshakes_evicted.fetch_add(1, Ordering::Relaxed);
        }
        self.record(|| {
            format!(
                "TLS handshake from {} failed: closed unfinished after {} to admit a new connection: {cap} \
                 handshakes were in progress (--grpc-max-pending-handshakes {cap}; a flood of connections?)",
                show(peer),
                seconds_or_ms(age)
            )
        });
    }

    /// A client that completed the handshake and closed without a request: counted with the
    /// failures (for a gRPC client it is its refusal of the switch's name), but not called a
    /// failed handshake: a TLS monitor that only checks the certificate does the same.
    fn closed_after_handshake(&self, peer: Option<SocketAddr>, detail: &str) {
        self.record(|| format!("TLS client {} {CLOSED_AFTER_HANDSHAKE}{detail}", show(peer)));
    }

    /// Counts one, and logs `line()` unless this window's lines are used up.
    fn record(&self, line: impl FnOnce() -> String) {
        if let Some(h) = &self.health {
            h.tls_handshake_failures.fetch_add(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        let admitted = {
            let mut limit = self.limit.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(suppressed) = limit.roll(now) {
                log_suppressed(suppressed, limit.window);
            }
            let admitted = limit.admit(now);
            if !admitted && limit.suppressed == 1 {
                self.summary_wake.notify_one();
            }
            admitted
        };
        if admitted {
            tracing::warn!("{}", line());
        }
    }

    /// Logs the summary of a window that has ended, if it suppressed anything.
    fn roll(&self, now: Instant) {
        let mut limit = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(suppressed) = limit.roll(now) {
            log_suppressed(suppressed, limit.window);
        }
    }

    fn summary_due(&self) -> Option<Instant> {
        self.limit.lock().unwrap_or_else(|e| e.into_inner()).summary_due()
    }
}

/// What a client that completed the handshake and then closed without a byte of HTTP/2 most
/// likely refused. grpc's BoringSSL clients (grpcio, C++) check the server's name only after the
/// handshake, so for the switch that refusal is a TLS connection closed at once.
const CLOSED_AFTER_HANDSHAKE: &str = "closed the connection right after the TLS handshake without sending a request \
     (a gRPC client does that when the switch's certificate does not hold the name it checks: \
     the address it dials, or its server-name override; a monitor that only checks the certificate does it too)";

/// A connection whose TLS handshake succeeded, as handed to tonic: the TLS stream, which reports
/// a client that closes it without sending a byte (read or write failing, or closed) as a failed
/// handshake when it is dropped.
pub struct Secured {
    inner: TlsStream<TcpStream>,
    /// Until the first byte is read: the peer, where to report, and the I/O error seen if any.
    watch: Option<Watch>,
}

struct Watch {
    peer: Option<SocketAddr>,
    failures: Arc<FailureLog>,
    error: Option<io::Error>,
}

impl Secured {
    /// Keeps the first I/O error of a connection that has sent nothing yet, for the report.
    fn note<T>(&mut self, result: &Poll<io::Result<T>>) {
        if let (Some(watch), Poll::Ready(Err(e))) = (&mut self.watch, result) {
            if watch.error.is_none() {
                watch.error = Some(io::Error::new(e.kind(), e.to_string()));
            }
        }
    }
}

impl Drop for Secured {
    fn drop(&mut self) {
        let Some(Watch { peer, failures, error }) = self.watch.take() else { return };
        match error {
            // Closed without a TLS close_notify: rustls's long "unexpected eof" text adds nothing.
            Some(e) if e.kind() != io::ErrorKind::UnexpectedEof => {
                failures.closed_after_handshake(peer, &format!(": {e}"))
            }
            _ => failures.closed_after_handshake(peer, ""),
        }
    }
}

impl Connected for Secured {
    // Tonic's own TLS connection info (peer address and certificates), as its TLS server gives.
    type ConnectInfo = <TlsStream<TcpStream> as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for Secured {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        if this.watch.is_some() {
            if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                this.watch = None; // the client speaks: it accepted the switch
            } else {
                this.note(&result);
            }
        }
        result
    }
}

impl AsyncWrite for Secured {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.note(&result);
        result
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.note(&result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.note(&result);
        result
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

fn show(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "an unknown peer".to_string(), |p| p.to_string())
}

fn log_suppressed(n: u64, window: Duration) {
    let window = seconds_or_ms(window);
    tracing::warn!(
        "{n} more failed TLS handshakes in the last {window} not logged (at most {LOG_BURST} are per {window})"
    );
}

/// A duration as the log states it: whole seconds as such ("10 s"), others to the millisecond
/// ("1.5 s"), below a second in milliseconds ("500 ms").
fn seconds_or_ms(d: Duration) -> String {
    let ms = d.as_millis();
    match (ms / 1000, ms % 1000) {
        (0, ms) => format!("{ms} ms"),
        (s, 0) => format!("{s} s"),
        (s, ms) => format!("{s}.{} s", format!("{ms:03}").trim_end_matches('0')),
    }
}

/// One connection's handshake, within `timeout` (from now: its TCP connect was just accepted).
async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    timeout: Duration,
) -> Result<TlsStream<TcpStream>, Failure> {
    let attempt = async {
        // Wait for the client's first byte: a connection closed without one is a probe.
        match stream.peek(&mut [0u8; 1]).await {
            Ok(0) | Err(_) => return Err(Failure::Silent),
            Ok(_) => {}
        }
        acceptor.accept(stream).await.map_err(|e| Failure::Handshake(reason(&e)))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Handshake(format!("no handshake within {}", seconds_or_ms(timeout)))),
    }
}

/// rustls's reason for a failed handshake (tokio-rustls wraps it in the io::Error), with what it
/// usually means for a P4Runtime client when that is not plain from the reason.
fn reason(e: &io::Error) -> String {
    let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) else {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            // grpc's BoringSSL clients close without a TLS alert when they refuse the certificate.
            return format!(
                "{e} (the client closed the connection during the handshake: a gRPC client does that \
                 when it does not accept the switch's certificate, e.g. it trusts another CA)"
            );
        }
        return e.to_string();
    };
    match hint(tls) {
        Some(hint) => format!("{tls} ({hint})"),
        None => tls.to_string(),
    }
}

fn hint(e: &rustls::Error) -> Option<&'static str> {
    use rustls::Error as E;
    Some(match e {
        E::AlertReceived(
            AlertDescription::UnknownCA | AlertDescription::BadCertificate | AlertDescription::CertificateUnknown,
        ) => "the client does not accept the switch's certificate: it trusts another CA, or checks a name --grpc-cert does not hold",
        E::NoCertificatesPresented => "mutual TLS: the client gave no certificate",
        E::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the client's certificate is not signed by --grpc-client-ca"
        }
        E::InvalidCertificate(CertificateError::Other(other))
            if other.to_string().contains("UnsupportedCertVersion") =>
        {
            "the client's certificate is X.509 v1; it must be v3 (docs/security.md)"
        }
        E::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => "not TLS: a plaintext client?",
        E::NoApplicationProtocol => "the client does not offer HTTP/2 (ALPN h2)",
        _ => return None,
    })
}

/// At most `burst` events logged per window of `window`; the window starts at the first event
/// after the previous one ended, and the events of a window beyond `burst` are counted for one
/// summary when it ends.
#[derive(Debug)]
struct RateLimit {
    burst: u32,
    window: Duration,
    start: Option<Instant>,
    logged: u32,
    suppressed: u64,
}

impl RateLimit {
    fn new(burst: u32, window: Duration) -> RateLimit {
        RateLimit { burst, window, start: None, logged: 0, suppressed: 0 }
    }

    /// Ends the window if it is over at `now` (the next event starts one): the number of events
    /// it did not log, if any, for the summary.
    fn roll(&mut self, now: Instant) -> Option<u64> {
        match self.start {
            Some(start) if now >= start + self.window => {
                self.start = None;
                self.logged = 0;
                Some(std::mem::take(&mut self.suppressed)).filter(|&n| n > 0)
            }
            _ => None,
        }
    }

    /// Whether to log an event now (after [`roll`](Self::roll)); counts it as suppressed if not.
    fn admit(&mut self, now: Instant) -> bool {
        self.start.get_or_insert(now);
        if self.logged < self.burst {
            self.logged += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// When the summary of the current window is due: its end, if it suppressed anything.
    fn summary_due(&self) -> Option<Instant> {
        self.start.filter(|_| self.suppressed > 0).map(|s| s + self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_logs_a_burst_then_counts_and_reports_once_per_window() {
        let mut limit = RateLimit::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        let admitted: Vec<bool> = (0..5).map(|i| limit.admit(t0 + Duration::from_millis(i))).collect();
        assert_eq!(admitted, [true, true, true, false, false]);
        assert_eq!(limit.summary_due(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(limit.roll(t0 + Duration::from_secs(9)), None, "the window is not over");
        assert_eq!(limit.roll(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(limit.summary_due(), None);
        // A new window logs a new burst; one that suppressed nothing has no summary.
        assert!(limit.admit(t0 + Duration::from_secs(20)));
        assert_eq!(limit.summary_due(), None);
        assert_eq!(limit.roll(t0 + Duration::from_secs(40)), None);
        assert!(limit.start.is_none());
    }

    #[test]
    fn durations_are_logged_in_seconds_or_below_one_in_milliseconds() {
        let ms = Duration::from_millis;
        assert_eq!(seconds_or_ms(ms(10_000)), "10 s");
        assert_eq!(seconds_or_ms(ms(1_500)), "1.5 s");
        assert_eq!(seconds_or_ms(ms(1_250)), "1.25 s");
        assert_eq!(seconds_or_ms(ms(60_001)), "60.001 s");
        assert_eq!(seconds_or_ms(ms(999)), "999 ms");
        assert_eq!(seconds_or_ms(ms(100)), "100 ms");
        assert_eq!(seconds_or_ms(Duration::from_micros(1_500_900)), "1.5 s");
    }

    #[test]
    fn the_defaults_are_nginx_like_and_said_at_start() {
        let d = Limits::default();
        assert_eq!((d.timeout, d.max_pending, d.log_window), (Duration::from_secs(10), 256, Duration::from_secs(10)));
        let line = d.describe();
        assert!(
            line.contains("each ended after 10 s (--grpc-handshake-timeout-ms), at most 256 in progress"),
            "{line}"
        );
        let short = Limits { timeout: Duration::from_millis(500), ..d };
        assert!(short.describe().contains("each ended after 500 ms"), "{}", short.describe());
    }

    #[test]
    fn reasons_say_what_the_failure_usually_means() {
        let io = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let r = reason(&io(rustls::Error::AlertReceived(AlertDescription::UnknownCA)));
        assert!(r.starts_with("received fatal alert: UnknownCA (the client does not accept"), "{r}");
        let r = reason(&io(rustls::Error::NoCertificatesPresented));
        assert_eq!(r, "peer sent no certificates (mutual TLS: the client gave no certificate)");
        let r = reason(&io(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)));
        assert!(r.ends_with("(not TLS: a plaintext client?)"), "{r}");
        let r = reason(&io(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)));
        assert!(r.contains("UnknownIssuer") && r.contains("--grpc-client-ca"), "{r}");
        // Not a rustls error: the io error as it is, and what a close during the handshake means.
        let r = reason(&io::Error::new(io::ErrorKind::UnexpectedEof, "tls handshake eof"));
        assert!(r.starts_with("tls handshake eof (the client closed the connection during"), "{r}");
        assert_eq!(reason(&io::Error::other("boom")), "boom");
    }
}
