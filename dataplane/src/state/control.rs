//! `SwitchControl`: the handle the P4Runtime server holds (Clone + Send + Sync), and
//! `DataPlaneLink`, the other ends of its queues that the data-plane thread holds.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::mpsc;

use super::*;
use crate::io::flow_cache::Epoch;
use crate::io::wake::Waker;
use crate::tables::Snapshot;

/// What the control side needs to know about the switch it controls.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    pub caps: Capacities,
    /// Data-plane port numbers (`-i N@IFACE`).
    pub ports: Vec<u32>,
    pub cpu_port: Option<u32>,
    pub seed: u64,
    /// Largest frame a PacketOut may carry.
    pub max_frame: usize,
    pub packet_in_depth: usize,
    pub digest_depth: usize,
    pub packet_out_depth: usize,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            caps: Capacities::default(),
            ports: Vec::new(),
            cpu_port: None,
            seed: 1,
            max_frame: 2016,
            packet_in_depth: 1024,
            digest_depth: 4096,
            packet_out_depth: 1024,
        }
    }
}

/// The control-plane side of the switch. Cheap to clone.
#[derive(Clone)]
pub struct SwitchControl {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: ControlConfig,
    store: Mutex<TableStore>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    registers: Arc<Registers>,
    counters: Arc<Counters>,
    packet_in_rx: tokio::sync::Mutex<mpsc::Receiver<PacketIn>>,
    digest_rx: tokio::sync::Mutex<mpsc::Receiver<DigestEvent>>,
    packet_out_tx: std_mpsc::SyncSender<(u32, Vec<u8>)>,
    waker: Arc<Waker>,
    reset_generation: Arc<AtomicU64>,
    radio_digests: Arc<AtomicBool>,
    epoch: Arc<Epoch>,
}

/// The data-plane ends of the shared state and queues. Owned by the data-plane thread.
pub struct DataPlaneLink {
    pub caps: Capacities,
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub registers: Arc<Registers>,
    pub counters: Arc<Counters>,
    /// `try_send` only: a full queue drops the packet-in (counted by the data plane).
    pub packet_in_tx: mpsc::Sender<PacketIn>,
    pub digest_tx: mpsc::Sender<DigestEvent>,
    pub packet_out_rx: std_mpsc::Receiver<(u32, Vec<u8>)>,
    pub waker: Arc<Waker>,
    /// Bumped by `reset_all`: the data plane drops its private per-pd state (rate queues).
    pub reset_generation: Arc<AtomicU64>,
    /// A client enabled `radio_state_digest_t`: only then does the data plane build radio digest
    /// messages (a wake-up of 100k UEs would otherwise queue messages nobody asked for).
    pub radio_digests: Arc<AtomicBool>,
    /// Bumped at every snapshot publish; the kernel fast path's entries carry it.
    pub epoch: Arc<Epoch>,
}

impl SwitchControl {
    pub fn new(cfg: ControlConfig) -> std::io::Result<(SwitchControl, DataPlaneLink)> {
        let caps = cfg.caps;
        let snapshot = Arc::new(ArcSwap::from_pointee(Snapshot::empty(caps.pds() as usize)));
        let registers = Arc::new(Registers::new(&caps, crate::dist::builtin_tables(), cfg.seed));
        let counters = Arc::new(Counters::new(&caps));
        let (packet_in_tx, packet_in_rx) = mpsc::channel(cfg.packet_in_depth.max(1));
        let (digest_tx, digest_rx) = mpsc::channel(cfg.digest_depth.max(1));
        let (packet_out_tx, packet_out_rx) = std_mpsc::sync_channel(cfg.packet_out_depth.max(1));
        let waker = Arc::new(Waker::new()?);
        let reset_generation = Arc::new(AtomicU64::new(0));
        let radio_digests = Arc::new(AtomicBool::new(false));
        let epoch = Arc::new(Epoch::default());
        let link = DataPlaneLink {
            caps,
            snapshot: snapshot.clone(),
            registers: registers.clone(),
            counters: counters.clone(),
            packet_in_tx,
            digest_tx,
            packet_out_rx,
            waker: waker.clone(),
            reset_generation: reset_generation.clone(),
            radio_digests: radio_digests.clone(),
            epoch: epoch.clone(),
        };
        let inner = Inner {
            store: Mutex::new(TableStore::new(caps)),
            cfg,
            snapshot,
            registers,
            counters,
            packet_in_rx: tokio::sync::Mutex::new(packet_in_rx),
            digest_rx: tokio::sync::Mutex::new(digest_rx),
            packet_out_tx,
            waker,
            reset_generation,
            radio_digests,
            epoch,
        };
        Ok((SwitchControl { inner: Arc::new(inner) }, link))
    }

    fn store(&self) -> std::sync::MutexGuard<'_, TableStore> {
        // A panic while holding the lock cannot leave the store half-updated in a way that
        // matters more than refusing all further control: keep serving.
        self.inner.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, store: &mut TableStore, touched: &[bool]) {
        if touched.iter().any(|t| *t) {
            let old = self.inner.snapshot.load_full();
            let mut new = store.compile(&old, touched, &|| self.inner.waker.wake());
            // Before the store: from here on the kernel fast path's entries of older snapshots
            // miss (io/flow_cache.rs says why this is atomic).
            new.epoch = self.inner.epoch.bump();
            self.inner.snapshot.store(Arc::new(new));
        }
    }

    /// Apply table updates as ONE batch: the data plane sees all of them or none of them (the new
    /// table snapshot is published once, at the end). Returns one result per update, in order.
    pub fn write_tables(&self, updates: Vec<(UpdateKind, TableEntry)>) -> Vec<Result<(), StateError>> {
        let mut store = self.store();
        let mut touched = vec![false; store.table_count()];
        let results = updates
            .into_iter()
            .map(|(kind, entry)| {
                let ti = store.apply(kind, entry)?;
                touched[ti] = true;
                Ok(())
            })
            .collect();
        self.publish(&mut store, &touched);
        results
    }

    /// `None` = reset to the P4 default.
    pub fn set_default_action(&self, table_id: u32, action: Option<ActionCall>) -> Result<(), StateError> {
        self.set_default_entry(table_id, action, DefaultCookies::default())
    }

    /// The default entry with the controller's cookies (`action` None: the P4 program's default,
    /// cookies reset).
    pub fn set_default_entry(
        &self,
        table_id: u32,
        action: Option<ActionCall>,
        cookies: DefaultCookies,
    ) -> Result<(), StateError> {
        let mut store = self.store();
        let ti = store.set_default(table_id, action, cookies)?;
        let mut touched = vec![false; store.table_count()];
        touched[ti] = true;
        self.publish(&mut store, &touched);
        Ok(())
    }

    /// `table_id` 0 = all tables.
    pub fn read_table(&self, table_id: u32) -> Result<Vec<TableEntry>, StateError> {
        self.store().read(table_id)
    }

    /// The stored entry with `entry`'s match fields and priority, if any (one hash probe).
    pub fn find_entry(&self, entry: &TableEntry) -> Result<Option<TableEntry>, StateError> {
        self.store().find(entry)
    }

    /// Number of entries in a table.
    pub fn table_len(&self, table_id: u32) -> Result<usize, StateError> {
        self.store().len(table_id)
    }

    pub fn default_action(&self, table_id: u32) -> Result<ActionCall, StateError> {
        self.store().default_action(table_id)
    }

    /// The checks `set_default_entry` makes, without setting anything (all-or-nothing batches
    /// check every update before applying any).
    pub fn check_default_action(&self, table_id: u32, action: &ActionCall) -> Result<(), StateError> {
        self.store().check_default(table_id, action)
    }

    pub fn default_cookies(&self, table_id: u32) -> Result<DefaultCookies, StateError> {
        self.store().default_cookies(table_id)
    }

    pub fn read_register(&self, reg_id: u32, index: u32) -> Result<u128, StateError> {
        self.inner.registers.read(reg_id, index)
    }

    /// Writing `rng_seed` reseeds the data plane's PRNG (before its next batch).
    pub fn write_register(&self, reg_id: u32, index: u32, value: u128) -> Result<(), StateError> {
        self.inner.registers.write(reg_id, index, value)?;
        if reg_id == crate::contract::REG_RNG_SEED {
            self.inner.waker.wake();
        }
        Ok(())
    }

    pub fn register_size(&self, reg_id: u32) -> Result<u32, StateError> {
        self.inner.registers.size(reg_id)
    }

    fn counter_array(&self, counter_id: u32, index: u32) -> Result<&CounterArrayRef, StateError> {
        let arr = self.inner.counters.by_id(counter_id)?;
        if index as usize >= arr.len() {
            let name = crate::contract::counter(counter_id).map_or("?", |c| c.name);
            return Err(StateError::OutOfRange(format!(
                "index {index} out of range for counter {name} (size {})",
                arr.len()
            )));
        }
        Ok(arr)
    }

    /// Returns (bytes, packets).
    pub fn read_counter(&self, counter_id: u32, index: u32) -> Result<(u64, u64), StateError> {
        Ok(self.counter_array(counter_id, index)?.get(index as usize))
    }

    pub fn write_counter(&self, counter_id: u32, index: u32, bytes: u64, packets: u64) -> Result<(), StateError> {
        self.counter_array(counter_id, index)?.set(index as usize, bytes, packets);
        Ok(())
    }

    pub fn counter_size(&self, counter_id: u32) -> Result<u32, StateError> {
        Ok(self.inner.counters.by_id(counter_id)?.len() as u32)
    }

    /// Queue a frame for transmission, unchanged, out of `egress_port`.
    pub fn packet_out(&self, egress_port: u32, frame: Vec<u8>) -> Result<(), StateError> {
        if !self.inner.cfg.ports.contains(&egress_port) {
            return Err(StateError::InvalidArgument(format!(
                "PacketOut egress_port {egress_port} is not a port of this switch (ports: {:?})",
                self.inner.cfg.ports
            )));
        }
        if frame.len() < 14 || frame.len() > self.inner.cfg.max_frame {
            return Err(StateError::InvalidArgument(format!(
                "PacketOut frame of {} bytes: must be 14..={} bytes",
                frame.len(),
                self.inner.cfg.max_frame
            )));
        }
        match self.inner.packet_out_tx.try_send((egress_port, frame)) {
            Ok(()) => {
                self.inner.waker.wake();
                Ok(())
            }
            Err(std_mpsc::TrySendError::Full(_)) => {
                Err(StateError::ResourceExhausted("PacketOut queue is full".into()))
            }
            Err(std_mpsc::TrySendError::Disconnected(_)) => {
                Err(StateError::FailedPrecondition("the data plane has stopped".into()))
            }
        }
    }

    /// Next frame the pipeline sent to the CPU port (bounded queue; waits until one arrives).
    pub async fn next_packet_in(&self) -> PacketIn {
        match self.inner.packet_in_rx.lock().await.recv().await {
            Some(p) => p,
            None => std::future::pending().await, // data plane gone: nothing will ever come
        }
    }

    /// Next digest event (bounded queue; waits until one arrives).
    pub async fn next_digest(&self) -> DigestEvent {
        match self.inner.digest_rx.lock().await.recv().await {
            Some(d) => d,
            None => std::future::pending().await,
        }
    }

    /// Whether the data plane reports radio state changes (the digest is enabled).
    pub fn set_radio_digests(&self, on: bool) {
        self.inner.radio_digests.store(on, Ordering::Relaxed);
    }

    pub fn capacities(&self) -> Capacities {
        self.inner.cfg.caps
    }

    /// The CPU port given with `--cpu-port`, if any.
    pub fn cpu_port(&self) -> Option<u32> {
        self.inner.cfg.cpu_port
    }

    /// The data-plane ports (`-i N@IFACE`).
    pub fn ports(&self) -> &[u32] {
        &self.inner.cfg.ports
    }

    /// Clear every table entry (defaults back to the P4 defaults), register (back to its initial
    /// value: built-in distribution tables, start seed) and counter.
    pub fn reset_all(&self) {
        let mut store = self.store();
        store.clear();
        let touched = vec![true; store.table_count()];
        self.publish(&mut store, &touched);
        self.inner.registers.reset();
        self.inner.counters.clear();
        self.inner.reset_generation.fetch_add(1, Ordering::Release);
        self.inner.waker.wake();
    }
}

type CounterArrayRef = super::store::CounterArray;
