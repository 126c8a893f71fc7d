//! p4netem-p4rt-bench: the P4Runtime write figures of a switch, measured with a client that costs
//! next to nothing (tonic/prost, the same generated code as the server), so that the figure is the
//! switch's and not the client's. The project's Python client spends 15-90 us of CPU per entry
//! building protobufs (docs/dataplane.md, "Profile: P4Runtime writes"), which caps it far below
//! what the switch takes; `bench/p4rt_writes.py` runs both and prints both.
//!
//! What it does, in the order of `bench/p4rt_writes.py`:
//! 1. counts the classifier's entries (wildcard Read) and reads its size from the P4Info;
//! 2. inserts `--entries` distinct ternary classifier entries (IPv4 source 10.128.x.y/32, distinct
//!    priorities from `--first-priority`; 0 = as many as the table has room for) in Write RPCs of
//!    `--batch` updates, one after the other; the rate counts from building the first request to
//!    the last reply;
//! 3. reads the table back (the count must have grown by exactly that many);
//! 4. `--modifies` one-entry MODIFY Writes of the middle entry, one after the other, alternating
//!    its profile, each timed from building the request to the reply (the switch publishes the
//!    new snapshot before it answers, so a reply means the change is in force);
//! 5. deletes them all again (timed), so the switch is left as found, and checks the count.
//!
//! Writes go out under `--election-id`: with `--arbitrate` it opens its own StreamChannel and
//! becomes primary with that id; without, it writes on behalf of the primary that holds the id
//! (a P4Runtime Write is accepted from whoever presents the primary's election id), which is how
//! the bench runs it next to its own Python controller without taking the primary role away.
//! Prints one JSON object.
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;
use p4netem_switch::contract::{self, ck, ACTION_SET_PROFILE, TABLE_CLASSIFIER};
use p4netem_switch::p4rt::proto::p4::v1 as pb;
use pb::p4_runtime_client::P4RuntimeClient;
use tonic::transport::Channel;

#[derive(Parser, Debug)]
#[command(version, about = "P4Runtime classifier write rate and MODIFY round trip (p4netem benchmarks)")]
struct Args {
    /// The switch's P4Runtime address (host:port).
    #[arg(long, default_value = "127.0.0.1:9559")]
    grpc_addr: String,
    #[arg(long, default_value_t = 1)]
    device_id: u64,
    /// Election id the Writes carry (the primary's).
    #[arg(long, default_value_t = 1)]
    election_id: u64,
    /// Become primary with --election-id on a StreamChannel of our own first.
    #[arg(long)]
    arbitrate: bool,
    /// Entries to insert (0: fill the classifier to its size).
    #[arg(long, default_value_t = 0)]
    entries: u32,
    /// Updates per Write RPC.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    batch: u32,
    /// One-entry MODIFY round trips to time.
    #[arg(long, default_value_t = 2000)]
    modifies: u32,
    /// Priority of the first entry (the others count up from it).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i32).range(1..))]
    first_priority: i32,
    /// Run the inserts, deletes and a second MODIFY loop with this thread SCHED_FIFO at this
    /// priority (root only; 0 = everything at normal priority; the first MODIFY loop always runs
    /// at normal priority): how a controller runs its time-critical Writes (the timeline player
    /// uses 4, below the switch's gRPC threads' 5), so that the figures are the switch's and not
    /// the wait of a normal-priority client for a CPU on a busy machine.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=99))]
    rt_priority: i32,
    /// First IPv4 source address of the entries (one /32 each, counting up).
    #[arg(long, default_value = "10.128.0.0")]
    first_src: std::net::Ipv4Addr,
}

/// Canonical P4Runtime byte string (shortest big-endian, 0 is one zero byte).
fn canon(v: u128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let skip = b.iter().take_while(|x| **x == 0).count().min(15);
    b[skip..].to_vec()
}

struct Entries {
    src_field: u32,
    params: [u32; 3],
    first_src: u32,
    first_priority: i32,
}

impl Entries {
    fn new(args: &Args) -> anyhow::Result<Entries> {
        let table = contract::table(TABLE_CLASSIFIER).context("classifier not in the contract")?;
        let action = contract::action(ACTION_SET_PROFILE).context("set_profile not in the contract")?;
        let param = |name: &str| {
            action.params.iter().find(|p| p.name == name).map(|p| p.id).with_context(|| format!("set_profile.{name}"))
        };
        Ok(Entries {
            src_field: table.keys[ck::IPV4_SRC].id,
            params: [param("profile_id")?, param("direction")?, param("ue_id")?],
            first_src: u32::from(args.first_src),
            first_priority: args.first_priority,
        })
    }

    /// Entry `i`: IPv4 source first_src + i /32 -> profile `profile`, UE i (no action: a key).
    fn entry(&self, i: u32, profile: Option<u32>) -> pb::TableEntry {
        let ternary = pb::field_match::Ternary {
            value: canon(self.first_src.wrapping_add(i) as u128),
            mask: canon(u32::MAX as u128),
        };
        let action = profile.map(|p| pb::TableAction {
            r#type: Some(pb::table_action::Type::Action(pb::Action {
                action_id: ACTION_SET_PROFILE,
                params: [p, 0, i]
                    .iter()
                    .zip(self.params)
                    .map(|(v, id)| pb::action::Param { param_id: id, value: canon(*v as u128) })
                    .collect(),
            })),
        });
        pb::TableEntry {
            table_id: TABLE_CLASSIFIER,
            r#match: vec![pb::FieldMatch {
                field_id: self.src_field,
                field_match_type: Some(pb::field_match::FieldMatchType::Ternary(ternary)),
            }],
            action,
            priority: self.first_priority + i as i32,
            ..Default::default()
        }
    }
}

struct Bench {
    client: P4RuntimeClient<Channel>,
    args: Args,
}

impl Bench {
    fn write_request(&self, kind: pb::update::Type, entries: impl Iterator<Item = pb::TableEntry>) -> pb::WriteRequest {
        pb::WriteRequest {
            device_id: self.args.device_id,
            election_id: Some(pb::Uint128 { high: 0, low: self.args.election_id }),
            updates: entries
                .map(|e| pb::Update {
                    r#type: kind as i32,
                    entity: Some(pb::Entity { entity: Some(pb::entity::Entity::TableEntry(e)) }),
                })
                .collect(),
            atomicity: pb::write_request::Atomicity::ContinueOnError as i32,
            ..Default::default()
        }
    }

    async fn write(&mut self, req: pb::WriteRequest) -> anyhow::Result<()> {
        let n = req.updates.len();
        match self.client.write(req).await {
            Ok(_) => Ok(()),
            Err(s) => bail!("Write of {n} update(s) failed: {:?}: {}", s.code(), s.message()),
        }
    }

    async fn count(&mut self) -> anyhow::Result<usize> {
        let req = pb::ReadRequest {
            device_id: self.args.device_id,
            entities: vec![pb::Entity {
                entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                    table_id: TABLE_CLASSIFIER,
                    ..Default::default()
                })),
            }],
            ..Default::default()
        };
        let mut stream = self.client.read(req).await.context("Read of the classifier")?.into_inner();
        let mut n = 0;
        while let Some(r) = stream.message().await.context("Read of the classifier")? {
            n += r.entities.len();
        }
        Ok(n)
    }

    async fn capacity(&mut self) -> anyhow::Result<u32> {
        let req = pb::GetForwardingPipelineConfigRequest {
            device_id: self.args.device_id,
            response_type: pb::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie as i32,
        };
        let cfg = self.client.get_forwarding_pipeline_config(req).await.context("GetForwardingPipelineConfig")?;
        let info = cfg.into_inner().config.and_then(|c| c.p4info).context("the switch has no pipeline (P4Info) set")?;
        info.tables
            .iter()
            .find(|t| t.preamble.as_ref().is_some_and(|p| p.id == TABLE_CLASSIFIER))
            .map(|t| t.size as u32)
            .context("no classifier in the switch's P4Info")
    }
}

impl Bench {
    /// `--modifies` one-entry MODIFYs of entry `i` one after the other, alternating its profile;
    /// the round trips in ms, sorted.
    async fn modify_rtts(&mut self, entries: &Entries, i: u32) -> anyhow::Result<Vec<f64>> {
        let mut rtts = Vec::with_capacity(self.args.modifies as usize);
        for k in 0..self.args.modifies {
            let t = Instant::now();
            let req = self.write_request(
                pb::update::Type::Modify,
                std::iter::once(entries.entry(i, Some(if k % 2 == 0 { 3 } else { 2 }))),
            );
            self.write(req).await?;
            rtts.push(t.elapsed().as_secs_f64() * 1e3);
        }
        rtts.sort_by(f64::total_cmp);
        Ok(rtts)
    }
}

/// This thread SCHED_FIFO while the guard lives (the runtime is single-threaded: all of the
/// client's work, socket I/O included, runs on it).
struct Realtime(libc::c_int, libc::sched_param);

impl Realtime {
    fn enter(prio: i32) -> anyhow::Result<Realtime> {
        // SAFETY: plain syscalls on the calling thread with a valid sched_param.
        unsafe {
            let mut saved = libc::sched_param { sched_priority: 0 };
            let policy = libc::sched_getscheduler(0);
            libc::sched_getparam(0, &mut saved);
            let p = libc::sched_param { sched_priority: prio };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
                bail!(
                    "--rt-priority {prio}: SCHED_FIFO refused ({}); run as root or use 0",
                    std::io::Error::last_os_error()
                );
            }
            Ok(Realtime(policy, saved))
        }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        // SAFETY: as above, restoring what enter() read.
        unsafe {
            libc::sched_setscheduler(0, self.0, &self.1);
        }
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let k = ((q / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[k]
}

/// Open a StreamChannel and become primary with `election_id`; the returned sender keeps it open.
async fn arbitrate(
    client: &mut P4RuntimeClient<Channel>,
    device_id: u64,
    election_id: u64,
) -> anyhow::Result<tokio::sync::mpsc::Sender<pb::StreamMessageRequest>> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(pb::StreamMessageRequest {
        update: Some(pb::stream_message_request::Update::Arbitration(pb::MasterArbitrationUpdate {
            device_id,
            election_id: Some(pb::Uint128 { high: 0, low: election_id }),
            ..Default::default()
        })),
    })
    .await?;
    let mut responses = client
        .stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .context("StreamChannel")?
        .into_inner();
    let reply = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .context("no arbitration answer within 10 s")??;
    match reply.and_then(|r| r.update) {
        Some(pb::stream_message_response::Update::Arbitration(a)) if a.status.as_ref().is_some_and(|s| s.code == 0) => {
        }
        other => bail!("not primary with election id {election_id}: {other:?}"),
    }
    tokio::spawn(async move { while let Ok(Some(_)) = responses.message().await {} });
    Ok(tx)
}

async fn run(args: Args) -> anyhow::Result<serde_json::Value> {
    let endpoint = Channel::from_shared(format!("http://{}", args.grpc_addr))?.tcp_nodelay(true);
    let channel = endpoint.connect().await.with_context(|| format!("no P4Runtime server at {}", args.grpc_addr))?;
    let mut client =
        P4RuntimeClient::new(channel).max_decoding_message_size(1 << 30).max_encoding_message_size(1 << 30);
    let _stream =
        if args.arbitrate { Some(arbitrate(&mut client, args.device_id, args.election_id).await?) } else { None };
    let entries = Entries::new(&args)?;
    let mut b = Bench { client, args };

    let capacity = b.capacity().await?;
    let before = b.count().await?;
    let n = match b.args.entries {
        0 => capacity.saturating_sub(before as u32),
        n => n,
    };
    if n == 0 {
        bail!("the classifier is full ({before} of {capacity} entries): nothing to insert");
    }
    let batch = b.args.batch;
    // Inserts and deletes run real-time too (when asked): on a loaded machine a normal-priority
    // client otherwise waits for a CPU between batches, and the figure would be its wait.
    let rt = |prio| (prio > 0).then(|| Realtime::enter(prio)).transpose();
    let guard = rt(b.args.rt_priority)?;

    let t0 = Instant::now();
    for start in (0..n).step_by(batch as usize) {
        let req =
            b.write_request(pb::update::Type::Insert, (start..n.min(start + batch)).map(|i| entries.entry(i, Some(2))));
        b.write(req).await?;
    }
    let insert_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let during = b.count().await?;
    let read_s = t1.elapsed().as_secs_f64();
    if during - before != n as usize {
        bail!("read back {} classifier entries, wrote {n}", during - before);
    }

    drop(guard);
    let normal = b.modify_rtts(&entries, n / 2).await?;
    let guard = rt(b.args.rt_priority)?;
    let realtime = match guard {
        None => None,
        Some(_) => Some(b.modify_rtts(&entries, n / 2).await?),
    };

    let t2 = Instant::now();
    for start in (0..n).step_by(batch as usize) {
        let req =
            b.write_request(pb::update::Type::Delete, (start..n.min(start + batch)).map(|i| entries.entry(i, None)));
        b.write(req).await?;
    }
    let delete_s = t2.elapsed().as_secs_f64();
    let after = b.count().await?;
    if after != before {
        bail!("{} classifier entries left after deleting", after as i64 - before as i64);
    }

    let mut out = serde_json::json!({
        "client": "p4netem-p4rt-bench (tonic/prost)",
        "entries": n,
        "batch": batch,
        "capacity": capacity,
        "table_entries_before": before,
        "modify_table_entries": during,
        "insert_s": insert_s,
        "writes_per_s": n as f64 / insert_s,
        "read_s": read_s,
        "delete_s": delete_s,
        "deletes_per_s": n as f64 / delete_s,
        "modifies": normal.len(),
    });
    for (suffix, rtts) in [("", Some(&normal)), ("_rt", realtime.as_ref())] {
        let Some(rtts) = rtts.filter(|r| !r.is_empty()) else { continue };
        out[format!("modify_rtt_ms_p50{suffix}")] = percentile(rtts, 50.0).into();
        out[format!("modify_rtt_ms_p99{suffix}")] = percentile(rtts, 99.0).into();
        out[format!("modify_rtt_ms_max{suffix}")] = rtts[rtts.len() - 1].into();
    }
    if realtime.is_some() {
        out["rt_priority"] = b.args.rt_priority.into();
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let out = rt.block_on(run(args))?;
    println!("{out}");
    Ok(())
}
