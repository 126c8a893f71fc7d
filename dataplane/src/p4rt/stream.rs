//! StreamChannel: arbitration, PacketOut, PacketIn, DigestList and DigestListAck.
//!
//! Each stream gets a bounded queue of responses. Packet-ins and digest lists go to the primary's
//! queue with `try_send`: when the controller does not keep up they are dropped (the spec allows
//! it), so a slow controller never stalls the tasks that drain the data plane's queues.
//! Arbitration notices are never dropped: if the queue is full they are sent by a spawned task.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tonic::{Code, Status};

use crate::contract;

use super::arbitration::{Arbiter, ClientId, GroupKey, Notice, Standing};
use super::codec::{decode_uint, encode_uint};
use super::digest::OutList;
use super::error::{P4Error, P4Result};
use super::proto::google::rpc;
use super::proto::p4::v1 as pb;
use super::server::Shared;

/// Responses queued per stream before packet-ins and digests are dropped.
pub const STREAM_QUEUE: usize = 4096;

pub type Tx = mpsc::Sender<Result<pb::StreamMessageResponse, Status>>;

/// Live streams and who is primary.
#[derive(Default)]
pub struct Sessions {
    pub arbiter: Arbiter,
    pub senders: HashMap<ClientId, Tx>,
}

pub fn u128_of(id: &pb::Uint128) -> u128 {
    ((id.high as u128) << 64) | id.low as u128
}

fn uint128(v: u128) -> pb::Uint128 {
    pb::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

fn response(update: pb::stream_message_response::Update) -> pb::StreamMessageResponse {
    pb::StreamMessageResponse { update: Some(update) }
}

fn notice_message(n: &Notice) -> pb::StreamMessageResponse {
    let (code, message) = match n.standing {
        Standing::Primary => (Code::Ok, "this controller is the primary"),
        Standing::Backup => (Code::AlreadyExists, "another controller is the primary"),
        Standing::NoPrimary => (Code::NotFound, "there is no primary"),
    };
    response(pb::stream_message_response::Update::Arbitration(pb::MasterArbitrationUpdate {
        device_id: n.key.device_id,
        role: if n.key.role.is_empty() {
            None
        } else {
            Some(pb::Role { name: n.key.role.clone(), ..Default::default() })
        },
        election_id: n.election_id.map(uint128),
        status: Some(rpc::Status { code: code as i32, message: message.to_string(), details: Vec::new() }),
    }))
}

fn stream_error(code: Code, message: String, details: pb::stream_error::Details) -> pb::StreamMessageResponse {
    response(pb::stream_message_response::Update::Error(pb::StreamError {
        canonical_code: code as i32,
        message,
        space: String::new(),
        code: 0,
        details: Some(details),
    }))
}

impl Shared {
    /// Send arbitration notices; a change of primary also drops buffered digests (the spec allows
    /// it) so that the new primary hears about every learned address again.
    fn dispatch(self: &Arc<Self>, sessions: &Sessions, notices: Vec<Notice>) {
        let primary_changed = notices.len() > 1 || notices.iter().any(|n| n.standing != Standing::Backup);
        for n in notices {
            if let Some(tx) = sessions.senders.get(&n.to) {
                let msg = notice_message(&n);
                if let Err(mpsc::error::TrySendError::Full(msg)) = tx.try_send(Ok(msg)) {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let _ = tx.send(msg).await;
                    });
                }
            }
        }
        if primary_changed {
            self.digests.lock().unwrap().clear_transient();
        }
    }

    fn arbitrate(self: &Arc<Self>, client: ClientId, tx: &Tx, upd: pb::MasterArbitrationUpdate) -> P4Result<()> {
        let role = upd.role.unwrap_or_default();
        #[allow(deprecated)]
        let legacy_role_id = role.id;
        let key = GroupKey { device_id: upd.device_id, role: role.name.clone() };
        let mut sessions = self.sessions.lock().unwrap();
        // A live stream that changes device or role is refused by the arbiter (FAILED_PRECONDITION);
        // these checks are for a stream's first update.
        if sessions.arbiter.binding(client).is_none() {
            if upd.device_id != self.device_id {
                return Err(P4Error::not_found(format!(
                    "unknown device id {} (this target is device {})",
                    upd.device_id, self.device_id
                )));
            }
            if !role.name.is_empty() || legacy_role_id != 0 {
                return Err(P4Error::invalid(format!(
                    "role {:?} is not known: this target only has the default role (full pipeline access)",
                    if role.name.is_empty() { legacy_role_id.to_string() } else { role.name.clone() }
                )));
            }
        }
        if role.config.is_some() {
            return Err(P4Error::invalid("role.config is not supported: leave it unset for full pipeline access"));
        }
        let notices = sessions.arbiter.update(client, key, upd.election_id.as_ref().map(u128_of))?;
        sessions.senders.insert(client, tx.clone());
        self.dispatch(&sessions, notices);
        Ok(())
    }

    /// The stream of `client` ended (closed, broken or terminated by us).
    pub fn stream_closed(self: &Arc<Self>, client: ClientId) {
        let mut sessions = self.sessions.lock().unwrap();
        sessions.senders.remove(&client);
        let notices = sessions.arbiter.remove(client);
        if !notices.is_empty() {
            self.dispatch(&sessions, notices);
        }
    }

    fn is_primary_stream(&self, client: ClientId) -> bool {
        self.sessions.lock().unwrap().arbiter.client_is_primary(client)
    }

    fn packet_out(&self, client: ClientId, pkt: &pb::PacketOut) -> P4Result<()> {
        if !self.is_primary_stream(client) {
            return Err(P4Error::permission_denied("only the primary controller may send PacketOut"));
        }
        let header = contract::CONTROLLER_HEADERS
            .iter()
            .find(|h| h.name == "packet_out")
            .ok_or_else(|| P4Error::unimplemented("this pipeline has no packet_out header"))?;
        let mut values: Vec<Option<u128>> = vec![None; header.fields.len()];
        for m in &pkt.metadata {
            let Some(pos) = header.fields.iter().position(|f| f.id == m.metadata_id) else {
                return Err(P4Error::invalid(format!("packet_out has no metadata id {}", m.metadata_id)));
            };
            let f = &header.fields[pos];
            if values[pos].is_some() {
                return Err(P4Error::invalid(format!("packet_out metadata {} ({}) given twice", f.id, f.name)));
            }
            values[pos] = Some(
                decode_uint(&m.value, f.bits, &format_args!("packet_out metadata {} ({})", f.id, f.name))
                    .map_err(|e| P4Error::invalid(e.message))?,
            );
        }
        let mut port = None;
        for (f, v) in header.fields.iter().zip(&values) {
            let v =
                v.ok_or_else(|| P4Error::invalid(format!("packet_out metadata {} ({}) is missing", f.id, f.name)))?;
            if f.name == "egress_port" {
                port = Some(v as u32);
            }
        }
        let port = port.ok_or_else(|| P4Error::unimplemented("packet_out header has no egress_port field"))?;
        if Some(port) == self.cpu_port {
            return Err(P4Error::invalid(format!("egress_port {port} is the CPU port")));
        }
        self.control.packet_out(port, pkt.payload.clone())?;
        Ok(())
    }

    fn digest_ack(&self, ack: &pb::DigestListAck) -> P4Result<()> {
        if contract::digest(ack.digest_id).is_none() {
            return Err(P4Error::invalid(format!("unknown digest id {}", ack.digest_id)));
        }
        self.digests.lock().unwrap().on_ack(ack.digest_id, ack.list_id);
        Ok(())
    }

    /// Handle one message of a stream. Err terminates the stream with that status (only
    /// arbitration errors do); other errors are reported as StreamError and the stream goes on.
    pub fn on_stream_message(
        self: &Arc<Self>,
        client: ClientId,
        tx: &Tx,
        msg: pb::StreamMessageRequest,
    ) -> Result<(), Status> {
        use pb::stream_error::Details;
        use pb::stream_message_request::Update;
        let report = |e: P4Error, details: Details| {
            let _ = tx.try_send(Ok(stream_error(e.code, e.message, details)));
        };
        match msg.update {
            Some(Update::Arbitration(upd)) => self.arbitrate(client, tx, upd).map_err(Status::from)?,
            Some(Update::Packet(pkt)) => {
                if let Err(e) = self.packet_out(client, &pkt) {
                    report(e, Details::PacketOut(pb::PacketOutError { packet_out: Some(pkt) }));
                }
            }
            Some(Update::DigestAck(ack)) => {
                if let Err(e) = self.digest_ack(&ack) {
                    report(e, Details::DigestListAck(pb::DigestListAckError { digest_list_ack: Some(ack) }));
                }
            }
            Some(Update::Other(any)) => report(
                P4Error::unimplemented(format!("stream message of type {} is not supported", any.type_url)),
                Details::Other(pb::StreamOtherError { other: Some(any) }),
            ),
            None => report(
                P4Error::invalid("empty StreamMessageRequest"),
                Details::Other(pb::StreamOtherError { other: None }),
            ),
        }
        Ok(())
    }

    /// The primary's queue for the default role, if there is a primary.
    fn primary_tx(&self) -> Option<Tx> {
        let sessions = self.sessions.lock().unwrap();
        let key = GroupKey { device_id: self.device_id, role: String::new() };
        let client = sessions.arbiter.primary(&key)?;
        sessions.senders.get(&client).cloned()
    }

    /// Forward packet-ins from the data plane to the primary, forever.
    pub async fn pump_packet_ins(self: Arc<Self>) {
        let header = contract::CONTROLLER_HEADERS.iter().find(|h| h.name == "packet_in");
        loop {
            let p = self.control.next_packet_in().await;
            let Some(tx) = self.primary_tx() else { continue };
            let metadata = header
                .map(|h| {
                    h.fields
                        .iter()
                        .map(|f| pb::PacketMetadata {
                            metadata_id: f.id,
                            value: encode_uint(if f.name == "ingress_port" { p.ingress_port as u128 } else { 0 }),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let msg =
                response(pb::stream_message_response::Update::Packet(pb::PacketIn { payload: p.payload, metadata }));
            let _ = tx.try_send(Ok(msg));
        }
    }

    fn send_digest_list(&self, list: OutList) {
        let Some(tx) = self.primary_tx() else { return };
        let data = list
            .data
            .into_iter()
            .map(|fields| pb::P4Data {
                data: Some(pb::p4_data::Data::Struct(pb::P4StructLike {
                    members: fields
                        .into_iter()
                        .map(|v| pb::P4Data { data: Some(pb::p4_data::Data::Bitstring(encode_uint(v))) })
                        .collect(),
                })),
            })
            .collect();
        let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
        let msg = response(pb::stream_message_response::Update::Digest(pb::DigestList {
            digest_id: list.digest_id,
            list_id: list.list_id,
            data,
            timestamp,
        }));
        let _ = tx.try_send(Ok(msg));
    }

    /// Batch digest messages from the data plane into DigestLists, forever.
    pub async fn pump_digests(self: Arc<Self>) {
        loop {
            let deadline = self.digests.lock().unwrap().next_deadline();
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = self.control.next_digest() => {
                    let out = self.digests.lock().unwrap().on_message(ev.digest_id, ev.fields, Instant::now());
                    if let Some(list) = out {
                        self.send_digest_list(list);
                    }
                }
                _ = sleep => {
                    let out = self.digests.lock().unwrap().on_tick(Instant::now());
                    for list in out {
                        self.send_digest_list(list);
                    }
                }
                // A config change may move the next deadline.
                _ = self.digest_wake.notified() => {}
            }
        }
    }
}
