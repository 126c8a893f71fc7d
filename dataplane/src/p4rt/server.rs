//! The tonic P4Runtime service: request-level checks (device, role, primary), locking, and the
//! mapping of per-update/per-entity errors onto the spec's batch error format. The protocol rules
//! themselves live in the sibling modules.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prost::Message;
use tokio::sync::{mpsc, Notify, RwLock};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::Bytes;
use tonic::{Code, Request, Response, Status};

use crate::contract;
use crate::health::{Health, Rpc};
use crate::state::SwitchControl;

use super::arbitration::GroupKey;
use super::digest::DigestEngine;
use super::error::{P4Error, P4Result};
use super::p4info;
use super::pipeline::{Effect, Pipeline};
use super::proto::google::rpc;
use super::proto::p4::v1 as pb;
use super::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use super::read::read_entity;
use super::stream::{u128_of, Sessions, STREAM_QUEUE};
use super::write::{self, dataplane_atomic_capable, decode_op};
use super::ServerConfig;

/// Entities per ReadResponse message: keeps each message far below gRPC's default 4 MiB limit.
const READ_CHUNK: usize = 1000;
/// Read responses built ahead of a slow client.
const READ_QUEUE: usize = 8;

/// Collects read results into ReadResponses of READ_CHUNK entities and sends each when full.
struct ChunkSink<'a> {
    buf: Vec<pb::Entity>,
    tx: &'a mpsc::Sender<Result<pb::ReadResponse, Status>>,
    /// The client went away: the rest of the read is not sent.
    gone: bool,
}

impl ChunkSink<'_> {
    fn flush(&mut self) {
        if self.buf.is_empty() || self.gone {
            return;
        }
        let entities = std::mem::replace(&mut self.buf, Vec::with_capacity(READ_CHUNK));
        self.gone = self.tx.blocking_send(Ok(pb::ReadResponse { entities })).is_err();
    }
}

impl super::read::Sink for ChunkSink<'_> {
    fn push(&mut self, e: pb::Entity) {
        if self.gone {
            return;
        }
        self.buf.push(e);
        if self.buf.len() >= READ_CHUNK {
            self.flush();
        }
    }
}

/// The P4Runtime API version we implement: that of the p4runtime package the protos came from.
pub const API_VERSION: &str = env!("P4RUNTIME_PROTO_VERSION");

/// Everything the RPC handlers and background tasks share.
pub struct Shared {
    pub control: SwitchControl,
    pub device_id: u64,
    pub cpu_port: Option<u32>,
    pub sessions: Mutex<Sessions>,
    pub next_client: AtomicU64,
    pub pipeline: Mutex<Pipeline>,
    pub digests: Mutex<DigestEngine>,
    pub digest_wake: Notify,
    /// Writes (and pipeline commits) exclusive, reads shared: a Read sees a batch entirely or not
    /// at all, and batches are serializable.
    pub ops: RwLock<()>,
    /// Runtime table sizes, for the capacity checks of atomic batches.
    table_sizes: std::collections::HashMap<u32, u32>,
    health: Option<Arc<Health>>,
}

/// Times one request into the health histogram when dropped (every return path, errors too).
struct RpcTimer {
    health: Option<Arc<Health>>,
    rpc: Option<Rpc>,
    start: Instant,
}

impl Drop for RpcTimer {
    fn drop(&mut self) {
        if let (Some(h), Some(rpc)) = (&self.health, self.rpc.take()) {
            h.observe_rpc(rpc, self.start);
        }
    }
}

impl Shared {
    fn timer(&self, rpc: Rpc) -> RpcTimer {
        RpcTimer { health: self.health.clone(), rpc: Some(rpc), start: Instant::now() }
    }

    pub fn new(control: SwitchControl, cfg: &ServerConfig) -> Arc<Self> {
        let info = p4info::build(&control.capacities());
        // The switch knows its CPU port too (`--cpu-port`); either source will do.
        let cpu_port = cfg.cpu_port.or(control.cpu_port());
        let table_sizes = info
            .tables
            .iter()
            .filter_map(|t| t.preamble.as_ref().map(|p| (p.id, t.size.clamp(0, u32::MAX as i64) as u32)))
            .collect();
        Arc::new(Shared {
            health: cfg.health.clone(),
            control,
            device_id: cfg.device_id,
            cpu_port,
            sessions: Mutex::new(Sessions::default()),
            next_client: AtomicU64::new(1),
            pipeline: Mutex::new(Pipeline::new(info)),
            digests: Mutex::new(DigestEngine::new()),
            digest_wake: Notify::new(),
            ops: RwLock::new(()),
            table_sizes,
        })
    }

    fn check_device(&self, device_id: u64) -> P4Result<()> {
        if device_id != self.device_id {
            return Err(P4Error::not_found(format!(
                "unknown device id {device_id} (this target is device {})",
                self.device_id
            )));
        }
        Ok(())
    }

    /// Only the default role exists: a named role is unknown (NOT_FOUND, as the spec says for
    /// Write, Read and SetForwardingPipelineConfig).
    fn check_role(role: &str, legacy_role_id: u64) -> P4Result<()> {
        if !role.is_empty() || legacy_role_id != 0 {
            return Err(P4Error::not_found(format!(
                "unknown role {:?}: this target only has the default role",
                if role.is_empty() { legacy_role_id.to_string() } else { role.to_string() }
            )));
        }
        Ok(())
    }

    fn check_primary(&self, role: &str, election_id: Option<&pb::Uint128>) -> P4Result<()> {
        let key = GroupKey { device_id: self.device_id, role: role.to_string() };
        let election = election_id.map(u128_of);
        if self.sessions.lock().unwrap().arbiter.is_primary(&key, election) {
            return Ok(());
        }
        Err(P4Error::permission_denied(match election {
            None => "election_id is unset: only the primary controller may write".to_string(),
            Some(e) => format!(
                "election id {e} is not the primary's: only the primary controller may write \
                 (arbitrate on StreamChannel with the highest election id first)"
            ),
        }))
    }

    fn capacity(&self, table_id: u32) -> u32 {
        self.table_sizes.get(&table_id).copied().unwrap_or(u32::MAX)
    }
}

/// Type URL of the p4.v1.Error details. Every protobuf runtime resolves an Any by the last path
/// segment of its URL, so the conventional "type.googleapis.com" host is left out: the details
/// travel in one HTTP/2 trailer that gRPC clients limit (16 KiB by default), and each OK update
/// then costs 16 bytes instead of 34.
const ERROR_TYPE_URL: &str = "/p4.v1.Error";

/// The spec's batch error: overall UNKNOWN, one p4.v1.Error per element in `details`, OK ones
/// with only the code set, failed ones with the code and message only (no error space: this
/// target has no target-specific codes). The message repeats the first failure for clients that
/// only print it.
pub(crate) fn batch_status(results: &[P4Result<()>], what: &str, atomic: Option<&str>) -> Status {
    // Of an atomic batch, the updates that failed for a reason of their own (the rest are ABORTED).
    let own = |e: &&P4Error| e.code != Code::Aborted || atomic.is_none();
    let failed = results.iter().filter(|r| r.as_ref().err().filter(own).is_some()).count();
    let first = results
        .iter()
        .enumerate()
        .find_map(|(i, r)| r.as_ref().err().filter(own).map(|e| (i, e)))
        .or_else(|| results.iter().enumerate().find_map(|(i, r)| r.as_ref().err().map(|e| (i, e))));
    let (unit, units) = if what == "Write" { ("update", "updates") } else { ("entity", "entities") };
    let message = match first {
        Some((i, e)) => format!(
            "{what} failed for {failed} of {} {units}{}; first: {unit} {i}: {:?}: {}",
            results.len(),
            atomic.map(|m| format!(" ({m}: none applied)")).unwrap_or_default(),
            e.code,
            e.message
        ),
        None => format!("{what} failed"),
    };
    let details = results
        .iter()
        .map(|r| {
            let err = match r {
                Ok(()) => pb::Error { canonical_code: Code::Ok as i32, ..Default::default() },
                Err(e) => pb::Error { canonical_code: e.code as i32, message: e.message.clone(), ..Default::default() },
            };
            prost_types::Any { type_url: ERROR_TYPE_URL.to_string(), value: err.encode_to_vec() }
        })
        .collect();
    let st = rpc::Status { code: Code::Unknown as i32, message: message.clone(), details };
    Status::with_details(Code::Unknown, message, Bytes::from(st.encode_to_vec()))
}

pub struct Service {
    shared: Arc<Shared>,
}

type ResponseStream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let req = request.into_inner();
        let s = &self.shared;
        let _timer = s.timer(Rpc::Write);
        s.check_device(req.device_id)?;
        #[allow(deprecated)]
        Shared::check_role(&req.role, req.role_id)?;
        s.check_primary(&req.role, req.election_id.as_ref())?;
        use pb::write_request::Atomicity;
        let atomicity = Atomicity::try_from(req.atomicity)
            .map_err(|_| P4Error::invalid(format!("unknown atomicity {}", req.atomicity)))?;
        let mode = match atomicity {
            Atomicity::ContinueOnError => None,
            Atomicity::RollbackOnError => Some("ROLLBACK_ON_ERROR"),
            Atomicity::DataplaneAtomic => Some("DATAPLANE_ATOMIC"),
        };

        // On a blocking thread, as a Read: a write can take long (a wildcard reset of the per-UE
        // arrays, a large batch: seconds on a loaded host), and done on the runtime's one worker
        // it held up every other RPC and the HTTP/2 PING answers of every connection with it, so
        // clients with a keepalive (the web's: 1 s) dropped their connections at each reset.
        // The exclusive lock is taken there too: a cancelled RPC then never lets the next write
        // in before this one has finished.
        let shared = self.shared.clone();
        let results = tokio::task::spawn_blocking(move || -> Result<Vec<P4Result<()>>, Status> {
            let s = &shared;
            let _guard = s.ops.blocking_write();
            let ops: Vec<P4Result<write::Op>> = req.updates.iter().map(|u| decode_op(&s.control, u)).collect();
            if atomicity == Atomicity::DataplaneAtomic && !dataplane_atomic_capable(&ops) {
                return Err(P4Error::unimplemented(
                    "DATAPLANE_ATOMIC batches may hold only table match entries (default entries, registers, \
                     counters and digest configs are separate stores); use ROLLBACK_ON_ERROR for all-or-nothing",
                )
                .into());
            }
            let results = {
                let mut digests = s.digests.lock().unwrap();
                let results = write::apply(&s.control, &mut digests, ops, mode, |t| s.capacity(t));
                s.control.set_radio_digests(digests.config(contract::DIGEST_RADIO_STATE).is_some());
                results
            };
            s.digest_wake.notify_one();
            Ok(results)
        })
        .await
        .map_err(|e| Status::internal(format!("Write task failed: {e}")))??;
        if results.iter().all(|r| r.is_ok()) {
            Ok(Response::new(pb::WriteResponse {}))
        } else {
            Err(batch_status(&results, "Write", mode))
        }
    }

    type ReadStream = ResponseStream<pb::ReadResponse>;

    async fn read(&self, request: Request<pb::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let req = request.into_inner();
        let s = &self.shared;
        s.check_device(req.device_id)?;
        Shared::check_role(&req.role, 0)?;
        // Built on a blocking thread and streamed in chunks as they fill: a wildcard read of a
        // per-UE array is millions of entities, which must neither sit in memory at once nor
        // hold up the async runtime.
        let shared = self.shared.clone();
        let (tx, rx) = mpsc::channel::<Result<pb::ReadResponse, Status>>(READ_QUEUE);
        let timer = s.timer(Rpc::Read);
        tokio::task::spawn_blocking(move || {
            let _timer = timer; // until the last entity is queued
            let s = &shared;
            let _guard = s.ops.blocking_read();
            // A copy, so that a long read does not hold up the digest task.
            let digests: Vec<_> = s.digests.lock().unwrap().configs().collect();
            let mut sink = ChunkSink { buf: Vec::with_capacity(READ_CHUNK), tx: &tx, gone: false };
            let results: Vec<P4Result<()>> =
                req.entities.iter().map(|e| read_entity(&s.control, &digests, e, &mut sink)).collect();
            sink.flush();
            if results.iter().any(|r| r.is_err()) {
                let _ = tx.blocking_send(Err(batch_status(&results, "Read", None)));
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<pb::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::SetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        let s = &self.shared;
        let _timer = s.timer(Rpc::SetForwardingPipelineConfig);
        s.check_device(req.device_id)?;
        #[allow(deprecated)]
        Shared::check_role(&req.role, req.role_id)?;
        s.check_primary(&req.role, req.election_id.as_ref())?;
        // On a blocking thread, as a Write: clearing every table, register and counter is long
        // enough to hold up the other RPCs and the connections' PING answers.
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || -> Result<(), Status> {
            let s = &shared;
            let _guard = s.ops.blocking_write();
            let effect = s.pipeline.lock().unwrap().set(req.action, req.config)?;
            if effect == Effect::ClearForwardingState {
                s.control.reset_all();
                s.digests.lock().unwrap().reset();
                s.control.set_radio_digests(false);
                s.digest_wake.notify_one();
            }
            Ok(())
        })
        .await
        .map_err(|e| Status::internal(format!("SetForwardingPipelineConfig task failed: {e}")))??;
        Ok(Response::new(pb::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<pb::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::GetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        let _timer = self.shared.timer(Rpc::GetForwardingPipelineConfig);
        self.shared.check_device(req.device_id)?;
        let config = self.shared.pipeline.lock().unwrap().get(req.response_type)?;
        Ok(Response::new(pb::GetForwardingPipelineConfigResponse { config: Some(config) }))
    }

    type StreamChannelStream = ResponseStream<pb::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<tonic::Streaming<pb::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let shared = self.shared.clone();
        let client = shared.next_client.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    m = inbound.message() => m,
                    // The client stopped reading responses: the stream is gone.
                    _ = tx.closed() => break,
                };
                match msg {
                    Ok(Some(m)) => {
                        if let Err(status) = shared.on_stream_message(client, &tx, m) {
                            // Arbitration errors terminate the stream with that status.
                            let _ = tx.send(Err(status)).await;
                            break;
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            shared.stream_closed(client);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        request: Request<pb::CapabilitiesRequest>,
    ) -> Result<Response<pb::CapabilitiesResponse>, Status> {
        let req = request.into_inner();
        let _timer = self.shared.timer(Rpc::Capabilities);
        // Older clients do not set device_id; 0 means "the device".
        if req.device_id != 0 {
            self.shared.check_device(req.device_id)?;
        }
        Ok(Response::new(pb::CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.to_string(),
            experimental: None,
        }))
    }
}

/// Listens on the P4Runtime address. Done before anything else starts, so that an address in use
/// is one clear error (tonic would only say "transport error" once the data plane is up).
pub fn bind(addr: std::net::SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "P4Runtime address {addr} is already in use (another p4netem-switch or simple_switch_grpc?): \
             stop it or pass --grpc-addr HOST:PORT with a free port"
        ),
        _ => anyhow::anyhow!("P4Runtime address {addr}: cannot listen: {e}"),
    })?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Run the P4Runtime server until `shutdown` completes.
pub async fn serve(
    control: SwitchControl,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = bind(cfg.addr)?;
    serve_on(listener, control, cfg, shutdown).await
}

/// How long a stopping server lets open RPCs finish before it closes their connections.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves `router` on `incoming` until `shutdown` completes.
///
/// Graceful shutdown waits for every open stream to end, and a controller's StreamChannel (held
/// for mastership as long as it runs) never does: a switch stopped under a connected controller
/// hung until the client went away. Unary RPCs in flight get SHUTDOWN_GRACE to finish; then the
/// server is dropped, closing the remaining connections.
async fn serve_until<I, IO, IE>(
    router: tonic::transport::server::Router,
    incoming: I,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error>
where
    I: tokio_stream::Stream<Item = Result<IO, IE>>,
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + tonic::transport::server::Connected + Unpin + Send + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = fired_tx.send(());
    };
    let serve = router.serve_with_incoming_shutdown(incoming, signal);
    tokio::pin!(serve);
    tokio::select! {
        r = &mut serve => r,
        Ok(()) = fired_rx => {
            tokio::select! {
                r = &mut serve => r,
                _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
                    tracing::info!(grace = ?SHUTDOWN_GRACE, "P4Runtime streams still open at shutdown: closing them");
                    Ok(())
                }
            }
        }
    }
}

/// Run the P4Runtime server on a listener from [`bind`] until `shutdown` completes.
pub async fn serve_on(
    listener: std::net::TcpListener,
    control: SwitchControl,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    cfg.transport.check(&cfg.addr)?;
    cfg.transport.warn_if_exposed(&cfg.addr);
    let tls = cfg.transport.server_tls()?;
    let limit = cfg.transport.max_message_bytes;
    let tcp = tonic::transport::server::TcpIncoming::from(tokio::net::TcpListener::from_std(listener)?)
        .with_nodelay(Some(true));
    let shared = Shared::new(control, &cfg);
    let packet_ins = tokio::spawn(shared.clone().pump_packet_ins());
    let digests = tokio::spawn(shared.clone().pump_digests());
    // grpc.health.v1 beside P4Runtime, on the same port and TLS: SERVING while the data plane runs.
    let (health_service, health_task) = super::health_check::service(cfg.health.clone()).await;
    let service = P4RuntimeServer::new(Service { shared })
        // P4Info, big batches and bmv2 JSON device configs exceed tonic's 4 MiB default; the cap
        // still keeps one request from holding hundreds of MB (tonic answers a too-big one OUT_OF_RANGE, naming the limit).
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
    // Streams per connection are capped by HTTP/2 (refused streams), not by tonic's
    // concurrency_limit_per_connection, whose semaphore can deadlock with HTTP/2 flow control
    // when it is below max_concurrent_streams (hyper issue 3559).
    let router = tonic::transport::Server::builder()
        .http2_max_header_list_size(super::listen::MAX_HEADER_LIST_BYTES)
        .max_concurrent_streams(super::listen::MAX_STREAMS_PER_CONNECTION)
        .add_service(service)
        .add_service(health_service);
    tracing::info!(addr = %cfg.addr, device_id = cfg.device_id, transport = cfg.transport.describe(),
                   max_message_bytes = limit, "P4Runtime server listening");
    // TLS: the handshakes are done here (handshake.rs, which logs the failed ones), not by tonic,
    // which is given the TLS streams.
    let (result, accept_task) = match tls {
        Some(config) => {
            let limits = cfg.transport.handshakes;
            tracing::info!("{}", limits.describe());
            let (incoming, task) = super::handshake::incoming(tcp, config, limits, cfg.health.clone());
            (serve_until(router, incoming, shutdown).await, Some(task))
        }
        None => (serve_until(router, tcp, shutdown).await, None),
    };
    if let Some(task) = accept_task {
        task.abort();
    }
    packet_ins.abort();
    digests.abort();
    if let Some(task) = health_task {
        task.abort();
    }
    result.map_err(|e| anyhow::anyhow!("P4Runtime server on {}: {e}", cfg.addr))
}
