//! The P4Runtime server in-process, driven by the generated gRPC client over a real TCP socket,
//! with a real `SwitchControl` (no data-plane thread: nothing here needs packets to move).

use std::net::SocketAddr;
use std::time::Duration;

use p4netem_switch::contract;
use p4netem_switch::p4rt::proto::google::rpc;
use p4netem_switch::p4rt::proto::p4::v1 as pb;
use p4netem_switch::p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use p4netem_switch::p4rt::{serve, ServerConfig};
use p4netem_switch::state::{ControlConfig, SwitchControl};
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::Code;

const DEVICE: u64 = 7;

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start() -> Server {
    let (control, _link) = SwitchControl::new(ControlConfig { ports: vec![1, 2], ..Default::default() }).unwrap();
    // Leak the link: its queues must stay open for the server's lifetime.
    std::mem::forget(_link);
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let cfg = ServerConfig { addr, device_id: DEVICE, cpu_port: Some(510) };
    tokio::spawn(async move {
        serve(control, cfg, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Server { addr, stop: Some(stop) }
}

async fn client(s: &Server) -> P4RuntimeClient<Channel> {
    P4RuntimeClient::connect(format!("http://{}", s.addr)).await.unwrap()
}

struct Stream {
    tx: mpsc::Sender<pb::StreamMessageRequest>,
    rx: tonic::Streaming<pb::StreamMessageResponse>,
}

async fn stream(s: &Server) -> Stream {
    let (tx, rx) = mpsc::channel(16);
    let rx = client(s).await.stream_channel(ReceiverStream::new(rx)).await.unwrap().into_inner();
    Stream { tx, rx }
}

impl Stream {
    async fn arbitrate(&mut self, device_id: u64, election: u64) -> Result<pb::MasterArbitrationUpdate, tonic::Status> {
        let upd = pb::MasterArbitrationUpdate {
            device_id,
            election_id: Some(pb::Uint128 { high: 0, low: election }),
            ..Default::default()
        };
        self.tx
            .send(pb::StreamMessageRequest { update: Some(pb::stream_message_request::Update::Arbitration(upd)) })
            .await
            .unwrap();
        self.next_arbitration().await
    }

    async fn next_arbitration(&mut self) -> Result<pb::MasterArbitrationUpdate, tonic::Status> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.rx.message()).await.expect("stream answer")?;
            match msg.and_then(|m| m.update) {
                Some(pb::stream_message_response::Update::Arbitration(a)) => return Ok(a),
                Some(_) => continue,
                None => return Err(tonic::Status::cancelled("stream ended")),
            }
        }
    }
}

fn uint(v: u128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let i = b.iter().position(|&x| x != 0).unwrap_or(15);
    b[i..].to_vec()
}

fn port_map_entry(port: u128, out: u128) -> pb::TableEntry {
    pb::TableEntry {
        table_id: contract::TABLE_PORT_MAP,
        r#match: vec![pb::FieldMatch {
            field_id: 1,
            field_match_type: Some(pb::field_match::FieldMatchType::Exact(pb::field_match::Exact { value: uint(port) })),
        }],
        action: Some(pb::TableAction {
            r#type: Some(pb::table_action::Type::Action(pb::Action {
                action_id: contract::ACTION_SET_EGRESS_PORT,
                params: vec![pb::action::Param { param_id: 1, value: uint(out) }],
            })),
        }),
        ..Default::default()
    }
}

fn write_req(election: u64, updates: Vec<pb::Update>) -> pb::WriteRequest {
    pb::WriteRequest {
        device_id: DEVICE,
        election_id: Some(pb::Uint128 { high: 0, low: election }),
        updates,
        ..Default::default()
    }
}

fn insert(te: pb::TableEntry) -> pb::Update {
    pb::Update {
        r#type: pb::update::Type::Insert as i32,
        entity: Some(pb::Entity { entity: Some(pb::entity::Entity::TableEntry(te)) }),
    }
}

/// The per-update p4.v1.Error codes of a failed batch.
fn update_codes(st: &tonic::Status) -> Vec<Code> {
    assert_eq!(st.code(), Code::Unknown, "{st:?}");
    let s = rpc::Status::decode(st.details()).expect("google.rpc.Status in details");
    assert_eq!(s.code, Code::Unknown as i32);
    s.details.iter().map(|a| Code::from(pb::Error::decode(a.value.as_slice()).unwrap().canonical_code)).collect()
}

#[tokio::test]
async fn arbitration_write_read_and_errors() {
    let s = start().await;
    let mut c = client(&s).await;

    // Capabilities and the P4Info before any Set.
    let caps = c.capabilities(pb::CapabilitiesRequest::default()).await.unwrap().into_inner();
    assert!(!caps.p4runtime_api_version.is_empty());
    let cfg = c
        .get_forwarding_pipeline_config(pb::GetForwardingPipelineConfigRequest { device_id: DEVICE, response_type: 0 })
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(cfg.p4info.unwrap().tables.len(), contract::TABLES.len());

    // Nobody is primary yet: writes are refused.
    let st = c.write(write_req(1, vec![insert(port_map_entry(1, 2))])).await.unwrap_err();
    assert_eq!(st.code(), Code::PermissionDenied);

    let mut a = stream(&s).await;
    let ok = a.arbitrate(DEVICE, 10).await.unwrap();
    assert_eq!(ok.status.unwrap().code, 0);
    let mut b = stream(&s).await;
    let backup = b.arbitrate(DEVICE, 5).await.unwrap();
    assert_eq!(backup.status.unwrap().code, Code::AlreadyExists as i32);
    assert_eq!(backup.election_id.unwrap().low, 10);

    c.write(write_req(10, vec![insert(port_map_entry(1, 2))])).await.unwrap();
    let st = c.write(write_req(5, vec![insert(port_map_entry(3, 2))])).await.unwrap_err();
    assert_eq!(st.code(), Code::PermissionDenied);
    let st = c
        .write(pb::WriteRequest { device_id: DEVICE + 1, ..write_req(10, vec![insert(port_map_entry(3, 2))]) })
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::NotFound);

    // Read back, canonical.
    let q = pb::ReadRequest {
        device_id: DEVICE,
        entities: vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: contract::TABLE_PORT_MAP,
                ..Default::default()
            })),
        }],
        ..Default::default()
    };
    let mut rs = c.read(q).await.unwrap().into_inner();
    let mut got = Vec::new();
    while let Some(r) = rs.message().await.unwrap() {
        got.extend(r.entities);
    }
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].entity, Some(pb::entity::Entity::TableEntry(port_map_entry(1, 2))));

    // Batch errors: one p4.v1.Error per update.
    let st = c
        .write(write_req(10, vec![insert(port_map_entry(4, 2)), insert(port_map_entry(0x200, 2)), insert(port_map_entry(1, 2))]))
        .await
        .unwrap_err();
    assert_eq!(update_codes(&st), vec![Code::Ok, Code::OutOfRange, Code::AlreadyExists]);

    // Duplicate election id terminates the new stream with INVALID_ARGUMENT.
    let mut dup = stream(&s).await;
    assert_eq!(dup.arbitrate(DEVICE, 10).await.unwrap_err().code(), Code::InvalidArgument);
    // Unknown device: NOT_FOUND.
    let mut other = stream(&s).await;
    assert_eq!(other.arbitrate(DEVICE + 1, 11).await.unwrap_err().code(), Code::NotFound);

    // The primary leaves: the backup hears NOT_FOUND and is still not primary.
    drop(a);
    let notice = b.next_arbitration().await.unwrap();
    assert_eq!(notice.status.unwrap().code, Code::NotFound as i32);
    assert_eq!(notice.election_id.unwrap().low, 10);
    let st = c.write(write_req(5, vec![insert(port_map_entry(5, 2))])).await.unwrap_err();
    assert_eq!(st.code(), Code::PermissionDenied);
    // Re-arbitrating with the highest id seen makes it primary.
    assert_eq!(b.arbitrate(DEVICE, 10).await.unwrap().status.unwrap().code, 0);
    c.write(write_req(10, vec![insert(port_map_entry(5, 2))])).await.unwrap();
}
