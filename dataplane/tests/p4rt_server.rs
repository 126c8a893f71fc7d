//! The P4Runtime server in-process, driven by the generated gRPC client over a real TCP socket,
//! with a real `SwitchControl` (no data-plane thread: nothing here needs packets to move).

use std::net::SocketAddr;
use std::time::Duration;

use p4netem_switch::contract;
use p4netem_switch::p4rt::proto::google::rpc;
use p4netem_switch::p4rt::proto::p4::v1 as pb;
use p4netem_switch::p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use p4netem_switch::p4rt::{serve, ServerConfig};
use p4netem_switch::state::{ControlConfig, DataPlaneLink, DigestEvent, PacketIn, SwitchControl};
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::Code;

const DEVICE: u64 = 7;

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    /// The data-plane ends of the switch's queues: the test plays the data plane.
    link: DataPlaneLink,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start() -> Server {
    let (control, link) = SwitchControl::new(ControlConfig { ports: vec![1, 2], ..Default::default() }).unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let cfg =
        ServerConfig { addr, device_id: DEVICE, cpu_port: Some(510), transport: Default::default(), health: None };
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
    Server { addr, stop: Some(stop), link }
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

    async fn send(&self, update: pb::stream_message_request::Update) {
        self.tx.send(pb::StreamMessageRequest { update: Some(update) }).await.unwrap();
    }

    /// The next non-arbitration message.
    async fn next_other(&mut self) -> pb::stream_message_response::Update {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.rx.message())
                .await
                .expect("stream message")
                .unwrap()
                .expect("stream open");
            match msg.update.unwrap() {
                pb::stream_message_response::Update::Arbitration(_) => continue,
                other => return other,
            }
        }
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
            field_match_type: Some(pb::field_match::FieldMatchType::Exact(pb::field_match::Exact {
                value: uint(port),
            })),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
        .write(write_req(
            10,
            vec![insert(port_map_entry(4, 2)), insert(port_map_entry(0x200, 2)), insert(port_map_entry(1, 2))],
        ))
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

fn modify(entity: pb::entity::Entity) -> pb::Update {
    pb::Update { r#type: pb::update::Type::Modify as i32, entity: Some(pb::Entity { entity: Some(entity) }) }
}

async fn read_all(c: &mut P4RuntimeClient<Channel>, e: pb::entity::Entity) -> Vec<pb::entity::Entity> {
    let q = pb::ReadRequest { device_id: DEVICE, entities: vec![pb::Entity { entity: Some(e) }], ..Default::default() };
    let mut rs = c.read(q).await.unwrap().into_inner();
    let mut got = Vec::new();
    while let Some(r) = rs.message().await.unwrap() {
        got.extend(r.entities.into_iter().filter_map(|e| e.entity));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_counters_pipeline_packet_io_and_digests() {
    let s = start().await;
    let mut c = client(&s).await;
    let mut p = stream(&s).await;
    assert_eq!(p.arbitrate(DEVICE, 1).await.unwrap().status.unwrap().code, 0);

    // Registers: write one cell, read it back canonical; out-of-range index.
    let seed = pb::RegisterEntry {
        register_id: contract::REG_RNG_SEED,
        index: Some(pb::Index { index: 0 }),
        data: Some(pb::P4Data { data: Some(pb::p4_data::Data::Bitstring(uint(0xABCD_EF01_2345))) }),
    };
    c.write(write_req(1, vec![modify(pb::entity::Entity::RegisterEntry(seed.clone()))])).await.unwrap();
    let got =
        read_all(&mut c, pb::entity::Entity::RegisterEntry(pb::RegisterEntry { data: None, ..seed.clone() })).await;
    assert_eq!(got, vec![pb::entity::Entity::RegisterEntry(seed.clone())]);
    let bad = pb::RegisterEntry { index: Some(pb::Index { index: 1 }), ..seed.clone() };
    let st = c.write(write_req(1, vec![modify(pb::entity::Entity::RegisterEntry(bad))])).await.unwrap_err();
    assert_eq!(update_codes(&st), vec![Code::OutOfRange]);

    // Counters: set, read, reset; wildcard read has one entry per index.
    let ctr = |index: i64, bytes: i64, packets: i64| pb::CounterEntry {
        counter_id: contract::COUNTER_PROFILE_IN,
        index: Some(pb::Index { index }),
        data: Some(pb::CounterData { byte_count: bytes, packet_count: packets }),
    };
    c.write(write_req(1, vec![modify(pb::entity::Entity::CounterEntry(ctr(9, 1500, 3)))])).await.unwrap();
    let q = pb::CounterEntry { data: None, ..ctr(9, 0, 0) };
    assert_eq!(
        read_all(&mut c, pb::entity::Entity::CounterEntry(q)).await,
        vec![pb::entity::Entity::CounterEntry(ctr(9, 1500, 3))]
    );
    c.write(write_req(1, vec![modify(pb::entity::Entity::CounterEntry(ctr(9, 0, 0)))])).await.unwrap();
    assert_eq!(
        read_all(&mut c, pb::entity::Entity::CounterEntry(q)).await,
        vec![pb::entity::Entity::CounterEntry(ctr(9, 0, 0))]
    );
    let all = read_all(
        &mut c,
        pb::entity::Entity::CounterEntry(pb::CounterEntry {
            counter_id: contract::COUNTER_PROFILE_IN,
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(all.len() as u32, contract::DEFAULT_PD);

    // Pipeline: our own P4Info verifies; VERIFY_AND_COMMIT clears the tables; Get is symmetric.
    c.write(write_req(1, vec![insert(port_map_entry(1, 2))])).await.unwrap();
    let ours = c
        .get_forwarding_pipeline_config(pb::GetForwardingPipelineConfigRequest { device_id: DEVICE, response_type: 0 })
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap()
        .p4info
        .unwrap();
    let set = |action: pb::set_forwarding_pipeline_config_request::Action,
               info: p4netem_switch::p4rt::proto::p4::config::v1::P4Info| {
        pb::SetForwardingPipelineConfigRequest {
            device_id: DEVICE,
            election_id: Some(pb::Uint128 { high: 0, low: 1 }),
            action: action as i32,
            config: Some(pb::ForwardingPipelineConfig {
                p4info: Some(info),
                p4_device_config: b"bmv2 json".to_vec(),
                cookie: Some(pb::forwarding_pipeline_config::Cookie { cookie: 99 }),
            }),
            ..Default::default()
        }
    };
    use pb::set_forwarding_pipeline_config_request::Action as A;
    let mut broken = ours.clone();
    broken.registers[0].size += 1;
    let st = c.set_forwarding_pipeline_config(set(A::Verify, broken)).await.unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(st.message().contains("register"), "{}", st.message());
    c.set_forwarding_pipeline_config(set(A::VerifyAndCommit, ours.clone())).await.unwrap();
    let entries = read_all(&mut c, pb::entity::Entity::TableEntry(pb::TableEntry::default())).await;
    assert!(entries.is_empty(), "VERIFY_AND_COMMIT clears the forwarding state");
    let got = c
        .get_forwarding_pipeline_config(pb::GetForwardingPipelineConfigRequest { device_id: DEVICE, response_type: 0 })
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(got.p4_device_config, b"bmv2 json");
    assert_eq!(got.cookie.unwrap().cookie, 99);

    // Packet-in: what the data plane queues reaches the primary with its metadata.
    s.link.packet_in_tx.try_send(PacketIn { ingress_port: 2, payload: vec![0xAB; 64] }).unwrap();
    match p.next_other().await {
        pb::stream_message_response::Update::Packet(pin) => {
            assert_eq!(pin.payload, vec![0xAB; 64]);
            let md: Vec<(u32, Vec<u8>)> = pin.metadata.iter().map(|m| (m.metadata_id, m.value.clone())).collect();
            assert_eq!(md, vec![(1, vec![2]), (2, vec![0])]);
        }
        other => panic!("expected a packet-in, got {other:?}"),
    }

    // Packet-out: to a port works, to an unknown port is a StreamError, to the CPU port too.
    let out = |port: u128| {
        pb::stream_message_request::Update::Packet(pb::PacketOut {
            payload: vec![0u8; 60],
            metadata: vec![
                pb::PacketMetadata { metadata_id: 1, value: uint(port) },
                pb::PacketMetadata { metadata_id: 2, value: vec![0] },
            ],
        })
    };
    p.send(out(1)).await;
    assert_eq!(s.link.packet_out_rx.recv_timeout(Duration::from_secs(5)).unwrap(), (1, vec![0u8; 60]));
    for port in [9, 510] {
        p.send(out(port)).await;
        match p.next_other().await {
            pb::stream_message_response::Update::Error(e) => {
                assert_eq!(e.canonical_code, Code::InvalidArgument as i32, "{e:?}");
                assert!(matches!(e.details, Some(pb::stream_error::Details::PacketOut(_))));
            }
            other => panic!("expected a stream error, got {other:?}"),
        }
    }

    // Digests: nothing is sent until a DigestEntry enables them; then lists of distinct messages.
    let digest = contract::DIGESTS[0].id;
    s.link.digest_tx.try_send(DigestEvent { digest_id: digest, fields: vec![0x0200_0000_0001, 1] }).unwrap();
    // Let the server take it off the queue (and drop it) before digests are enabled.
    while s.link.digest_tx.capacity() < s.link.digest_tx.max_capacity() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cfg = pb::DigestEntry {
        digest_id: digest,
        config: Some(pb::digest_entry::Config {
            max_timeout_ns: 50_000_000,
            max_list_size: 2,
            ack_timeout_ns: 1_000_000_000,
        }),
    };
    let ins = pb::Update {
        r#type: pb::update::Type::Insert as i32,
        entity: Some(pb::Entity { entity: Some(pb::entity::Entity::DigestEntry(cfg)) }),
    };
    c.write(write_req(1, vec![ins])).await.unwrap();
    for mac in [0x0200_0000_0002u128, 0x0200_0000_0002, 0x0200_0000_0003] {
        s.link.digest_tx.try_send(DigestEvent { digest_id: digest, fields: vec![mac, 1] }).unwrap();
    }
    match p.next_other().await {
        pb::stream_message_response::Update::Digest(d) => {
            assert_eq!(d.digest_id, digest);
            let macs: Vec<Vec<u8>> = d
                .data
                .iter()
                .map(|x| match &x.data {
                    Some(pb::p4_data::Data::Struct(s)) => match &s.members[0].data {
                        Some(pb::p4_data::Data::Bitstring(b)) => b.clone(),
                        _ => panic!(),
                    },
                    _ => panic!("digest data is not a struct"),
                })
                .collect();
            assert_eq!(macs, vec![uint(0x0200_0000_0002), uint(0x0200_0000_0003)], "duplicates removed, list cut at 2");
        }
        other => panic!("expected a digest list, got {other:?}"),
    }
}
