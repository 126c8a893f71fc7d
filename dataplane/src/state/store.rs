//! Register and counter arrays: atomics shared between the control plane and the data-plane thread.
//!
//! The data plane is the only writer on the fast path. Registers use relaxed load/store (the
//! per-pd state is only ever written by the data-plane thread, except for a deliberate control-plane
//! write). Counters use relaxed `fetch_add` so that a control-plane reset is never lost to a
//! concurrent read-modify-write of the data plane.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use super::lazy::{LazyArray, ZeroValid};
use crate::contract::{self, *};
use crate::io::flow_cache::FastCounts;
use crate::state::{Capacities, StateError};

/// `n` zeroed atomics (calloc: lazily zeroed pages for large arrays).
fn zeroed<A: ZeroValid>(n: usize) -> Box<[A]> {
    if n == 0 {
        return Vec::new().into_boxed_slice();
    }
    let layout = std::alloc::Layout::array::<A>(n).expect("array size overflows");
    debug_assert!(std::mem::align_of::<A>() <= 16, "calloc's alignment");
    // SAFETY: layout has non-zero size; a null result is handled; zero bytes are a valid A
    // (ZeroValid); the Box frees with the same layout (Layout::array::<A>(n)).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut A;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n))
    }
}

/// Stores 0 in every cell that is not 0 already: pages never written stay unmapped.
fn clear_u64(cells: &[AtomicU64]) {
    for c in cells {
        if c.load(Relaxed) != 0 {
            c.store(0, Relaxed);
        }
    }
}

/// Counter arrays: bytes at `2 * i`, packets at `2 * i + 1`, so one update touches one cache line.
///
/// profile_in and profile_out also count what the kernel fast path forwarded (io/flow_cache.rs):
/// its counts are added at every read, and a write stores the difference, so every read is
/// exact and current with no folding step.
pub struct CounterArray {
    cells: Box<[AtomicU64]>,
    fast: OnceLock<Arc<FastCounts>>,
}

impl CounterArray {
    fn new(size: u32) -> Self {
        CounterArray { cells: zeroed(size as usize * 2), fast: OnceLock::new() }
    }
    #[inline]
    pub fn add(&self, index: usize, bytes: u64) {
        if let Some(c) = self.cells.get(2 * index..2 * index + 2) {
            c[0].fetch_add(bytes, Relaxed);
            c[1].fetch_add(1, Relaxed);
        }
    }
    pub fn len(&self) -> usize {
        self.cells.len() / 2
    }
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
    pub fn get(&self, index: usize) -> (u64, u64) {
        let (fb, fp) = self.fast.get().map_or((0, 0), |f| f.get(index));
        (self.cells[2 * index].load(Relaxed).wrapping_add(fb), self.cells[2 * index + 1].load(Relaxed).wrapping_add(fp))
    }
    pub fn set(&self, index: usize, bytes: u64, packets: u64) {
        let (fb, fp) = self.fast.get().map_or((0, 0), |f| f.get(index));
        self.cells[2 * index].store(bytes.wrapping_sub(fb), Relaxed);
        self.cells[2 * index + 1].store(packets.wrapping_sub(fp), Relaxed);
    }
    /// From now on, reads add what the kernel fast path counted (profile_in, profile_out).
    pub fn add_fast_path(&self, fast: Arc<FastCounts>) {
        let _ = self.fast.set(fast);
    }
    /// Adds one packet and no bytes (PACKETS counters).
    #[inline]
    pub fn add_packet(&self, index: usize) {
        if let Some(c) = self.cells.get(2 * index + 1) {
            c.fetch_add(1, Relaxed);
        }
    }
    fn clear(&self) {
        clear_u64(&self.cells);
        if let Some(f) = self.fast.get() {
            for i in 0..f.len().min(self.len()) {
                if f.get(i) != (0, 0) {
                    self.set(i, 0, 0);
                }
            }
        }
    }
}

pub struct Counters {
    pub profile_in: CounterArray,
    pub profile_out: CounterArray,
    pub drops: CounterArray,
    pub parser_errors: CounterArray,
    pub profile_dup: CounterArray,
    pub profile_corrupt: CounterArray,
    /// CE marks made by the AQM instead of drops.
    pub profile_ecn_mark: CounterArray,
    /// Index `ue * RADIO_PROMO_KINDS + kind`.
    pub radio_promotions: CounterArray,
}

impl Counters {
    pub fn new(caps: &Capacities) -> Self {
        let size = |id| CounterArray::new(caps.counter_size(id).expect("contract counter"));
        Counters {
            profile_in: size(COUNTER_PROFILE_IN),
            profile_out: size(COUNTER_PROFILE_OUT),
            drops: size(COUNTER_DROPS),
            parser_errors: size(COUNTER_PARSER_ERRORS),
            profile_dup: size(COUNTER_PROFILE_DUP),
            profile_corrupt: size(COUNTER_PROFILE_CORRUPT),
            profile_ecn_mark: size(COUNTER_PROFILE_ECN_MARK),
            radio_promotions: size(COUNTER_RADIO_PROMOTIONS),
        }
    }

    pub fn by_id(&self, id: u32) -> Result<&CounterArray, StateError> {
        Ok(match id {
            COUNTER_PROFILE_IN => &self.profile_in,
            COUNTER_PROFILE_OUT => &self.profile_out,
            COUNTER_DROPS => &self.drops,
            COUNTER_PARSER_ERRORS => &self.parser_errors,
            COUNTER_PROFILE_DUP => &self.profile_dup,
            COUNTER_PROFILE_CORRUPT => &self.profile_corrupt,
            COUNTER_PROFILE_ECN_MARK => &self.profile_ecn_mark,
            COUNTER_RADIO_PROMOTIONS => &self.radio_promotions,
            _ => return Err(StateError::NotFound(format!("no counter with id {id:#x}"))),
        })
    }

    #[inline]
    pub fn count_drop(&self, pd: u32, reason: DropReason, bytes: u64) {
        self.drops.add((pd * DROP_REASONS + reason as u32) as usize, bytes);
    }

    pub fn clear(&self) {
        for c in [
            &self.profile_in,
            &self.profile_out,
            &self.drops,
            &self.parser_errors,
            &self.profile_dup,
            &self.profile_corrupt,
            &self.profile_ecn_mark,
            &self.radio_promotions,
        ] {
            c.clear();
        }
    }
}

/// Register arrays, each with its contract width.
pub struct Registers {
    pub next_free_ns: Box<[AtomicU64]>,
    pub last_release_ns: Box<[AtomicU64]>,
    pub ge_state: Box<[AtomicU8]>,
    /// netem 4-state loss state per pd (stage/loss.rs; 0 reads as TX_IN_GAP).
    pub loss4_state: Box<[AtomicU8]>,
    pub backlog_bytes: Box<[AtomicU32]>,
    pub backlog_pkts: Box<[AtomicU32]>,
    /// int16 two's complement values; four tables of `DIST_TABLE_LEN`.
    pub dist_table: Box<[AtomicU16]>,
    pub rng_seed: AtomicU64,
    /// Bumped on every `rng_seed` write; the data plane reseeds when it sees a new value.
    pub rng_seed_generation: AtomicU64,
    /// Per-UE radio state (see stage/radio.rs).
    pub radio: RadioRegisters,
    /// Per-pd CoDel variables (the `codel_*` registers; stage/codel.rs).
    pub codel: Box<[PdCodel]>,
    /// Per-pd RED variables (the `red_*` registers; stage/red.rs).
    pub red: Box<[PdRed]>,
    /// Per-bearer state, index `ue * 2 + direction` (stage/bearer.rs), allocated lazily.
    pub bearers: LazyArray<UeBearer>,
    /// `bearer_turn`, `bearer_last_turn`, `bearer_pf_best` per pd (v1model's, see above).
    bearer_pd: Box<[[AtomicU64; 3]]>,
    /// Per-pd slot state (the `slot_*` registers; stage/slot.rs).
    pub slot: Box<[PdSlot]>,
    /// Per-pd netem correlation state (the `*_corr_last` and `reorder_count` registers).
    pub corr: Box<[PdCorr]>,
    /// Per-pd trace state and the loaded traces' cells (stage/trace.rs).
    pub trace: Box<[PdTrace]>,
    pub trace_opportunity_ms: Box<[AtomicU32]>,
    pub trace_first_at: Box<[AtomicU32]>,
    /// Per-pd on/off link state (the `onoff_*` registers; stage/onoff.rs).
    pub onoff: Box<[PdOnOff]>,
    /// Per-pd PIE variables (the `pie_*` registers; stage/pie.rs).
    pub pie: Box<[PdPie]>,
    /// The built-in distribution tables, restored by a reset.
    initial_dist: Box<[i16]>,
    initial_seed: u64,
}

/// One pd's CoDel variables, one cache line: the contract's `codel_*` registers are views of
/// these fields.
#[repr(C, align(32))]
#[derive(Default)]
pub struct PdCodel {
    pub first_above_ns: AtomicU64,
    pub drop_next_ns: AtomicU64,
    pub count: AtomicU32,
    pub lastcount: AtomicU32,
    pub rec_inv_sqrt: AtomicU16,
    pub state: AtomicU8,
}

impl PdCodel {
    #[inline]
    pub fn load(&self) -> crate::stage::codel::Vars {
        crate::stage::codel::Vars {
            first_above_ns: self.first_above_ns.load(Relaxed),
            drop_next_ns: self.drop_next_ns.load(Relaxed),
            count: self.count.load(Relaxed),
            lastcount: self.lastcount.load(Relaxed),
            rec_inv_sqrt: self.rec_inv_sqrt.load(Relaxed),
            state: self.state.load(Relaxed),
        }
    }

    #[inline]
    pub fn store(&self, v: &crate::stage::codel::Vars) {
        self.first_above_ns.store(v.first_above_ns, Relaxed);
        self.drop_next_ns.store(v.drop_next_ns, Relaxed);
        self.count.store(v.count, Relaxed);
        self.lastcount.store(v.lastcount, Relaxed);
        self.rec_inv_sqrt.store(v.rec_inv_sqrt, Relaxed);
        self.state.store(v.state, Relaxed);
    }

    fn read(&self, reg_id: u32) -> Option<u128> {
        Some(match reg_id {
            REG_CODEL_FIRST_ABOVE_NS => self.first_above_ns.load(Relaxed) as u128,
            REG_CODEL_DROP_NEXT_NS => self.drop_next_ns.load(Relaxed) as u128,
            REG_CODEL_COUNT => self.count.load(Relaxed) as u128,
            REG_CODEL_LASTCOUNT => self.lastcount.load(Relaxed) as u128,
            REG_CODEL_REC_INV_SQRT => self.rec_inv_sqrt.load(Relaxed) as u128,
            REG_CODEL_STATE => self.state.load(Relaxed) as u128,
            _ => return None,
        })
    }

    fn write(&self, reg_id: u32, value: u128) -> bool {
        match reg_id {
            REG_CODEL_FIRST_ABOVE_NS => self.first_above_ns.store(value as u64, Relaxed),
            REG_CODEL_DROP_NEXT_NS => self.drop_next_ns.store(value as u64, Relaxed),
            REG_CODEL_COUNT => self.count.store(value as u32, Relaxed),
            REG_CODEL_LASTCOUNT => self.lastcount.store(value as u32, Relaxed),
            REG_CODEL_REC_INV_SQRT => self.rec_inv_sqrt.store(value as u16, Relaxed),
            REG_CODEL_STATE => self.state.store(value as u8, Relaxed),
            _ => return false,
        }
        true
    }
}

/// One pd's RED variables: the contract's `red_*` registers are views of these fields.
#[derive(Default)]
pub struct PdRed {
    pub qavg: AtomicU64,
    pub count: AtomicU32,
    pub qr: AtomicU32,
}

impl PdRed {
    #[inline]
    pub fn load(&self) -> crate::stage::red::Vars {
        crate::stage::red::Vars {
            qavg: self.qavg.load(Relaxed),
            count: self.count.load(Relaxed),
            qr: self.qr.load(Relaxed),
        }
    }

    #[inline]
    pub fn store(&self, v: &crate::stage::red::Vars) {
        self.qavg.store(v.qavg, Relaxed);
        self.count.store(v.count, Relaxed);
        self.qr.store(v.qr, Relaxed);
    }

    fn read(&self, reg_id: u32) -> Option<u128> {
        Some(match reg_id {
            REG_RED_QAVG => self.qavg.load(Relaxed) as u128,
            REG_RED_COUNT => self.count.load(Relaxed) as u128,
            REG_RED_QR => self.qr.load(Relaxed) as u128,
            _ => return None,
        })
    }

    fn write(&self, reg_id: u32, value: u128) -> bool {
        match reg_id {
            REG_RED_QAVG => self.qavg.store(value as u64, Relaxed),
            REG_RED_COUNT => self.count.store(value as u32, Relaxed),
            REG_RED_QR => self.qr.store(value as u32, Relaxed),
            _ => return false,
        }
        true
    }
}

const RED_REGISTERS: [u32; 3] = [REG_RED_QAVG, REG_RED_COUNT, REG_RED_QR];

/// One pd's slot state (netem `slot`, stage/slot.rs): the contract's `slot_*` registers are views
/// of these fields.
#[derive(Default)]
pub struct PdSlot {
    pub next_ns: AtomicU64,
    pub used_pkts: AtomicU32,
    pub used_bytes: AtomicU32,
}

impl PdSlot {
    #[inline]
    pub fn load(&self) -> crate::stage::slot::Vars {
        crate::stage::slot::Vars {
            next_ns: self.next_ns.load(Relaxed),
            used_pkts: self.used_pkts.load(Relaxed),
            used_bytes: self.used_bytes.load(Relaxed),
        }
    }

    #[inline]
    pub fn store(&self, v: &crate::stage::slot::Vars) {
        self.next_ns.store(v.next_ns, Relaxed);
        self.used_pkts.store(v.used_pkts, Relaxed);
        self.used_bytes.store(v.used_bytes, Relaxed);
    }

    fn read(&self, reg_id: u32) -> Option<u128> {
        Some(match reg_id {
            REG_SLOT_NEXT_NS => self.next_ns.load(Relaxed) as u128,
            REG_SLOT_USED_PKTS => self.used_pkts.load(Relaxed) as u128,
            REG_SLOT_USED_BYTES => self.used_bytes.load(Relaxed) as u128,
            _ => return None,
        })
    }

    fn write(&self, reg_id: u32, value: u128) -> bool {
        match reg_id {
            REG_SLOT_NEXT_NS => self.next_ns.store(value as u64, Relaxed),
            REG_SLOT_USED_PKTS => self.used_pkts.store(value as u32, Relaxed),
            REG_SLOT_USED_BYTES => self.used_bytes.store(value as u32, Relaxed),
            _ => return false,
        }
        true
    }
}

const SLOT_REGISTERS: [u32; 3] = [REG_SLOT_NEXT_NS, REG_SLOT_USED_PKTS, REG_SLOT_USED_BYTES];

/// One pd's netem correlation state (stage/correlation.rs): the `*_corr_last` registers (one cell
/// per correlated draw, in [`CORR_REGISTERS`] order) and `reorder_count`.
#[derive(Default)]
pub struct PdCorr {
    /// Bit 32 set once drawn, bits 0..31 netem's `last` (0: never drawn, seeded on first use).
    pub last: [AtomicU64; 5],
    /// netem's reorder counter: packets that took the delay line since the last one that skipped.
    pub reorder_count: AtomicU32,
}

impl PdCorr {
    fn read(&self, reg_id: u32) -> Option<u128> {
        if reg_id == REG_REORDER_COUNT {
            return Some(self.reorder_count.load(Relaxed) as u128);
        }
        let k = CORR_REGISTERS.iter().position(|&r| r == reg_id)?;
        Some(self.last[k].load(Relaxed) as u128)
    }

    fn write(&self, reg_id: u32, value: u128) -> bool {
        if reg_id == REG_REORDER_COUNT {
            self.reorder_count.store(value as u32, Relaxed);
            return true;
        }
        match CORR_REGISTERS.iter().position(|&r| r == reg_id) {
            Some(k) => {
                self.last[k].store(value as u64, Relaxed);
                true
            }
            None => false,
        }
    }

    fn clear(&self) {
        for c in &self.last {
            c.store(0, Relaxed);
        }
        self.reorder_count.store(0, Relaxed);
    }
}

/// The `*_corr_last` registers; a cell's index in [`PdCorr::last`] is the register's position here
/// (stage/correlation.rs names them).
pub const CORR_REGISTERS: [u32; 5] =
    [REG_DELAY_CORR_LAST, REG_LOSS_CORR_LAST, REG_DUP_CORR_LAST, REG_CORRUPT_CORR_LAST, REG_REORDER_CORR_LAST];

fn is_corr_register(id: u32) -> bool {
    id == REG_REORDER_COUNT || CORR_REGISTERS.contains(&id)
}

/// One pd's trace state (exact trace delivery, stage/trace.rs): the contract's per-pd `trace_*`
/// registers are views of these fields.
#[derive(Default)]
pub struct PdTrace {
    pub cycle_ns: AtomicU64,
    pub pos: AtomicU32,
    pub left: AtomicU32,
}

impl PdTrace {
    #[inline]
    pub fn load(&self) -> crate::stage::trace::Vars {
        crate::stage::trace::Vars {
            cycle_ns: self.cycle_ns.load(Relaxed),
            pos: self.pos.load(Relaxed),
            left: self.left.load(Relaxed),
        }
    }

    #[inline]
    pub fn store(&self, v: &crate::stage::trace::Vars) {
        self.cycle_ns.store(v.cycle_ns, Relaxed);
        self.pos.store(v.pos, Relaxed);
        self.left.store(v.left, Relaxed);
    }

    fn read(&self, reg_id: u32) -> Option<u128> {
        Some(match reg_id {
            REG_TRACE_CYCLE_NS => self.cycle_ns.load(Relaxed) as u128,
            REG_TRACE_POS => self.pos.load(Relaxed) as u128,
            REG_TRACE_LEFT => self.left.load(Relaxed) as u128,
            _ => return None,
        })
    }

    fn write(&self, reg_id: u32, value: u128) -> bool {
        match reg_id {
            REG_TRACE_CYCLE_NS => self.cycle_ns.store(value as u64, Relaxed),
            REG_TRACE_POS => self.pos.store(value as u32, Relaxed),
            REG_TRACE_LEFT => self.left.store(value as u32, Relaxed),
            _ => return false,
        }
        true
    }
}

const TRACE_REGISTERS: [u32; 3] = [REG_TRACE_CYCLE_NS, REG_TRACE_POS, REG_TRACE_LEFT];

/// One pd's on/off link (stage/onoff.rs): `onoff_state` and `onoff_at_ns`, as the pd's last packet
/// saw the link. Both 0: not started.
#[derive(Default)]
pub struct PdOnOff {
    pub state: AtomicU8,
    pub at_ns: AtomicU64,
}

impl PdOnOff {
    fn read(&self, reg_id: u32) -> Option<u128> {
        Some(match reg_id {
            REG_ONOFF_STATE => self.state.load(Relaxed) as u128,
            REG_ONOFF_AT_NS => self.at_ns.load(Relaxed) as u128,
            _ => return None,
        })
    }

    fn write(&self, reg_id: u32, value: u128) -> bool {
        match reg_id {
            REG_ONOFF_STATE => self.state.store(value as u8, Relaxed),
            REG_ONOFF_AT_NS => self.at_ns.store(value as u64, Relaxed),
            _ => return false,
        }
        true
    }

    fn clear(&self) {
        self.state.store(0, Relaxed);
        self.at_ns.store(0, Relaxed);
    }
}

const ONOFF_REGISTERS: [u32; 2] = [REG_ONOFF_STATE, REG_ONOFF_AT_NS];

/// One pd's PIE variables (stage/pie.rs): the contract's `pie_*` registers are views of these.
#[derive(Default)]
pub struct PdPie {
    pub prob: AtomicU64,
    pub qdelay_old_ns: AtomicU64,
    pub burst_ns: AtomicU64,
    pub accu_prob: AtomicU64,
    pub next_ns: AtomicU64,
}

impl PdPie {
    #[inline]
    pub fn load(&self) -> crate::stage::pie::Vars {
        crate::stage::pie::Vars {
            prob: self.prob.load(Relaxed),
            qdelay_old_ns: self.qdelay_old_ns.load(Relaxed),
            burst_ns: self.burst_ns.load(Relaxed),
            accu_prob: self.accu_prob.load(Relaxed),
            next_ns: self.next_ns.load(Relaxed),
        }
    }

    #[inline]
    pub fn store(&self, v: &crate::stage::pie::Vars) {
        self.prob.store(v.prob, Relaxed);
        self.qdelay_old_ns.store(v.qdelay_old_ns, Relaxed);
        self.burst_ns.store(v.burst_ns, Relaxed);
        self.accu_prob.store(v.accu_prob, Relaxed);
        self.next_ns.store(v.next_ns, Relaxed);
    }

    fn cell(&self, reg_id: u32) -> Option<&AtomicU64> {
        Some(match reg_id {
            REG_PIE_PROB => &self.prob,
            REG_PIE_QDELAY_OLD_NS => &self.qdelay_old_ns,
            REG_PIE_BURST_NS => &self.burst_ns,
            REG_PIE_ACCU_PROB => &self.accu_prob,
            REG_PIE_NEXT_NS => &self.next_ns,
            _ => return None,
        })
    }
}

const PIE_REGISTERS: [u32; 5] =
    [REG_PIE_PROB, REG_PIE_QDELAY_OLD_NS, REG_PIE_BURST_NS, REG_PIE_ACCU_PROB, REG_PIE_NEXT_NS];

const CODEL_REGISTERS: [u32; 6] = [
    REG_CODEL_FIRST_ABOVE_NS,
    REG_CODEL_DROP_NEXT_NS,
    REG_CODEL_COUNT,
    REG_CODEL_LASTCOUNT,
    REG_CODEL_REC_INV_SQRT,
    REG_CODEL_STATE,
];

fn atomics<T>(n: u32, f: impl Fn() -> T) -> Box<[T]> {
    (0..n).map(|_| f()).collect()
}

/// The per-bearer registers (index `ue * 2 + direction`), see stage/bearer.rs.
pub const BEARER_UE_REGISTERS: [u32; 7] = [
    REG_BEARER_BACKLOG_BYTES,
    REG_BEARER_BACKLOG_PKTS,
    REG_BEARER_DEFICIT,
    REG_BEARER_HEAD_SEQ,
    REG_BEARER_TAIL_SEQ,
    REG_BEARER_PF_AVG,
    REG_BEARER_PF_AT_NS,
];

/// One bearer (a UE's queue in one direction of a cell): the contract's per-bearer registers are
/// views of the first seven fields; `head`/`tail` link the waiting packets through the bearer
/// stage's per-buffer `next` array (pool handles + 1, 0 = none: all-zero is an empty bearer).
#[repr(C, align(16))]
pub struct UeBearer {
    pub pf_avg: AtomicU64,
    pub pf_at_ns: AtomicU64,
    pub backlog_bytes: AtomicU32,
    pub backlog_pkts: AtomicU32,
    pub deficit: AtomicU32,
    pub head_seq: AtomicU32,
    pub tail_seq: AtomicU32,
    pub head: AtomicU32,
    pub tail: AtomicU32,
}

// SAFETY: integer atomics only: all-zero bytes are valid.
unsafe impl ZeroValid for UeBearer {}

impl UeBearer {
    fn cell32(&self, reg_id: u32) -> Option<&AtomicU32> {
        Some(match reg_id {
            REG_BEARER_BACKLOG_BYTES => &self.backlog_bytes,
            REG_BEARER_BACKLOG_PKTS => &self.backlog_pkts,
            REG_BEARER_DEFICIT => &self.deficit,
            REG_BEARER_HEAD_SEQ => &self.head_seq,
            REG_BEARER_TAIL_SEQ => &self.tail_seq,
            _ => return None,
        })
    }

    fn read(&self, reg_id: u32) -> u128 {
        match reg_id {
            REG_BEARER_PF_AVG => self.pf_avg.load(Relaxed) as u128,
            REG_BEARER_PF_AT_NS => self.pf_at_ns.load(Relaxed) as u128,
            id => self.cell32(id).map_or(0, |c| c.load(Relaxed) as u128),
        }
    }

    fn write(&self, reg_id: u32, value: u128) {
        match reg_id {
            REG_BEARER_PF_AVG => self.pf_avg.store(value as u64, Relaxed),
            REG_BEARER_PF_AT_NS => self.pf_at_ns.store(value as u64, Relaxed),
            id => {
                if let Some(c) = self.cell32(id) {
                    c.store(value as u32, Relaxed)
                }
            }
        }
    }

    /// Zero the registers; the packet links stay (the packets are still waiting: see bearer.rs).
    fn reset(&self) {
        for c in [&self.pf_avg, &self.pf_at_ns] {
            if c.load(Relaxed) != 0 {
                c.store(0, Relaxed);
            }
        }
        for c in [&self.backlog_bytes, &self.backlog_pkts, &self.deficit, &self.head_seq, &self.tail_seq] {
            if c.load(Relaxed) != 0 {
                c.store(0, Relaxed);
            }
        }
    }
}

/// The per-pd arbitration registers of v1model's bearer scheduler (bearer.p4); p4netem-switch
/// sees every bearer at once and never needs them, so they only hold what a client writes.
const BEARER_PD_REGISTERS: [u32; 3] = [REG_BEARER_TURN, REG_BEARER_LAST_TURN, REG_BEARER_PF_BEST];

/// One UE's radio registers, in one cache line: a packet reads and writes only its own UE's line
/// (the contract's per-UE registers are views of these fields). `radio_state_time_ns`, written
/// only at state changes, is kept apart.
#[repr(C, align(64))]
pub struct UeRadio {
    pub since_ns: AtomicU64,
    pub last_activity_ns: AtomicU64,
    pub promo_done_ns: AtomicU64,
    pub drx_ref_ns: AtomicU64,
    /// The FACH virtual clock per direction (`radio_fach_free_ns[ue * 2 + direction]`).
    pub fach_free_ns: [AtomicU64; 2],
    pub promo_pkts: AtomicU32,
    pub state: AtomicU8,
}

// SAFETY: every field is an integer atomic (or an array of them): all-zero bytes are valid.
unsafe impl ZeroValid for UeRadio {}

/// The per-UE radio registers of the contract, zero (IDLE since 0, never active: a UE nobody has
/// heard from) until used, and allocated lazily (see [`LazyArray`]).
pub struct RadioRegisters {
    pub ues: LazyArray<UeRadio>,
    /// Index `ue * RADIO_STATE_STRIDE + state`.
    pub state_time_ns: LazyArray<AtomicU64>,
}

impl RadioRegisters {
    fn new(caps: &Capacities) -> Self {
        let n = caps.register_size(REG_RADIO_STATE).expect("contract register") as usize;
        RadioRegisters {
            ues: LazyArray::new(n, true),
            state_time_ns: LazyArray::new(n * RADIO_STATE_STRIDE as usize, false),
        }
    }

    /// The number of UEs the arrays hold.
    pub fn ues(&self) -> usize {
        self.ues.len()
    }

    fn size(&self, reg_id: u32) -> Option<usize> {
        let n = self.ues.len();
        Some(match reg_id {
            REG_RADIO_STATE
            | REG_RADIO_LAST_ACTIVITY_NS
            | REG_RADIO_PROMO_DONE_NS
            | REG_RADIO_DRX_REF_NS
            | REG_RADIO_STATE_SINCE_NS
            | REG_RADIO_PROMO_PKTS => n,
            REG_RADIO_FACH_FREE_NS => n * RADIO_DIRECTIONS as usize,
            REG_RADIO_STATE_TIME_NS => self.state_time_ns.len(),
            _ => return None,
        })
    }

    /// The 64-bit cell behind a register index, for the u64 registers.
    fn u64_cell(&self, reg_id: u32, i: usize) -> Option<&AtomicU64> {
        Some(match reg_id {
            REG_RADIO_LAST_ACTIVITY_NS => &self.ues[i].last_activity_ns,
            REG_RADIO_PROMO_DONE_NS => &self.ues[i].promo_done_ns,
            REG_RADIO_DRX_REF_NS => &self.ues[i].drx_ref_ns,
            REG_RADIO_STATE_SINCE_NS => &self.ues[i].since_ns,
            REG_RADIO_FACH_FREE_NS => &self.ues[i / 2].fach_free_ns[i % 2],
            REG_RADIO_STATE_TIME_NS => &self.state_time_ns[i],
            _ => return None,
        })
    }

    fn read(&self, reg_id: u32, i: usize) -> Option<u128> {
        match reg_id {
            REG_RADIO_STATE => Some(self.ues[i].state.load(Relaxed) as u128),
            REG_RADIO_PROMO_PKTS => Some(self.ues[i].promo_pkts.load(Relaxed) as u128),
            id => self.u64_cell(id, i).map(|c| c.load(Relaxed) as u128),
        }
    }

    fn write(&self, reg_id: u32, i: usize, value: u128) -> bool {
        match reg_id {
            REG_RADIO_STATE => self.ues[i].state.store(value as u8, Relaxed),
            REG_RADIO_PROMO_PKTS => self.ues[i].promo_pkts.store(value as u32, Relaxed),
            id => match self.u64_cell(id, i) {
                Some(c) => c.store(value as u64, Relaxed),
                None => return false,
            },
        }
        true
    }

    /// Zero everything that is not zero (untouched pages stay unmapped: reading them maps the
    /// shared zero page).
    fn reset(&self) {
        for u in self.ues.iter() {
            for c in [&u.since_ns, &u.last_activity_ns, &u.promo_done_ns, &u.drx_ref_ns]
                .into_iter()
                .chain(u.fach_free_ns.iter())
            {
                if c.load(Relaxed) != 0 {
                    c.store(0, Relaxed);
                }
            }
            if u.promo_pkts.load(Relaxed) != 0 {
                u.promo_pkts.store(0, Relaxed);
            }
            if u.state.load(Relaxed) != 0 {
                u.state.store(0, Relaxed);
            }
        }
        clear_u64(&self.state_time_ns);
    }
}

impl Registers {
    pub fn new(caps: &Capacities, initial_dist: Box<[i16]>, seed: u64) -> Self {
        let pds = caps.pds();
        assert_eq!(initial_dist.len() as u32, DIST_TABLE_LEN * DIST_TABLES);
        let r = Registers {
            next_free_ns: atomics(pds, || AtomicU64::new(0)),
            last_release_ns: atomics(pds, || AtomicU64::new(0)),
            ge_state: atomics(pds, || AtomicU8::new(0)),
            loss4_state: atomics(pds, || AtomicU8::new(0)),
            backlog_bytes: atomics(pds, || AtomicU32::new(0)),
            backlog_pkts: atomics(pds, || AtomicU32::new(0)),
            dist_table: atomics(DIST_TABLE_LEN * DIST_TABLES, || AtomicU16::new(0)),
            rng_seed: AtomicU64::new(seed),
            rng_seed_generation: AtomicU64::new(0),
            radio: RadioRegisters::new(caps),
            codel: atomics(pds, PdCodel::default),
            red: atomics(pds, PdRed::default),
            bearers: LazyArray::new(
                caps.register_size(REG_BEARER_BACKLOG_BYTES).expect("contract register") as usize,
                false,
            ),
            bearer_pd: atomics(pds, Default::default),
            slot: atomics(pds, PdSlot::default),
            corr: atomics(pds, PdCorr::default),
            trace: atomics(pds, PdTrace::default),
            trace_opportunity_ms: atomics(REG_TRACE_OPPORTUNITY_MS_SIZE, || AtomicU32::new(0)),
            trace_first_at: atomics(REG_TRACE_FIRST_AT_SIZE, || AtomicU32::new(0)),
            onoff: atomics(pds, PdOnOff::default),
            pie: atomics(pds, PdPie::default),
            initial_dist,
            initial_seed: seed,
        };
        r.restore_dist();
        r
    }

    fn restore_dist(&self) {
        for (cell, v) in self.dist_table.iter().zip(self.initial_dist.iter()) {
            cell.store(*v as u16, Relaxed);
        }
    }

    #[inline]
    pub fn dist(&self, index: usize) -> i16 {
        self.dist_table[index].load(Relaxed) as i16
    }

    pub fn read(&self, reg_id: u32, index: u32) -> Result<u128, StateError> {
        let i = self.check_index(reg_id, index)?;
        Ok(match reg_id {
            REG_NEXT_FREE_NS => self.next_free_ns[i].load(Relaxed) as u128,
            REG_LAST_RELEASE_NS => self.last_release_ns[i].load(Relaxed) as u128,
            REG_GE_STATE => self.ge_state[i].load(Relaxed) as u128,
            REG_LOSS4_STATE => self.loss4_state[i].load(Relaxed) as u128,
            REG_BACKLOG_BYTES => self.backlog_bytes[i].load(Relaxed) as u128,
            REG_BACKLOG_PKTS => self.backlog_pkts[i].load(Relaxed) as u128,
            REG_DIST_TABLE => self.dist_table[i].load(Relaxed) as u128,
            REG_RNG_SEED => self.rng_seed.load(Relaxed) as u128,
            id if CODEL_REGISTERS.contains(&id) => self.codel[i].read(id).expect("a codel register"),
            id if RED_REGISTERS.contains(&id) => self.red[i].read(id).expect("a red register"),
            id if BEARER_UE_REGISTERS.contains(&id) => self.bearers[i].read(id),
            id if BEARER_PD_REGISTERS.contains(&id) => {
                let k = BEARER_PD_REGISTERS.iter().position(|&r| r == id).unwrap_or(0);
                self.bearer_pd[i][k].load(Relaxed) as u128
            }
            id if SLOT_REGISTERS.contains(&id) => self.slot[i].read(id).expect("a slot register"),
            id if is_corr_register(id) => self.corr[i].read(id).expect("a correlation register"),
            id if TRACE_REGISTERS.contains(&id) => self.trace[i].read(id).expect("a trace register"),
            REG_TRACE_OPPORTUNITY_MS => self.trace_opportunity_ms[i].load(Relaxed) as u128,
            REG_TRACE_FIRST_AT => self.trace_first_at[i].load(Relaxed) as u128,
            id if ONOFF_REGISTERS.contains(&id) => self.onoff[i].read(id).expect("an onoff register"),
            id if PIE_REGISTERS.contains(&id) => self.pie[i].cell(id).expect("a pie register").load(Relaxed) as u128,
            id => self.radio.read(id, i).expect("check_index validated the id"),
        })
    }

    pub fn write(&self, reg_id: u32, index: u32, value: u128) -> Result<(), StateError> {
        let i = self.check_index(reg_id, index)?;
        let def = contract::register(reg_id).expect("validated");
        if value > max_value(def.bits) {
            return Err(StateError::InvalidArgument(format!(
                "value {value:#x} does not fit register {} ({} bits)",
                def.name, def.bits
            )));
        }
        match reg_id {
            REG_NEXT_FREE_NS => self.next_free_ns[i].store(value as u64, Relaxed),
            REG_LAST_RELEASE_NS => self.last_release_ns[i].store(value as u64, Relaxed),
            REG_GE_STATE => self.ge_state[i].store(value as u8, Relaxed),
            REG_LOSS4_STATE => self.loss4_state[i].store(value as u8, Relaxed),
            REG_BACKLOG_BYTES => self.backlog_bytes[i].store(value as u32, Relaxed),
            REG_BACKLOG_PKTS => self.backlog_pkts[i].store(value as u32, Relaxed),
            REG_DIST_TABLE => self.dist_table[i].store(value as u16, Relaxed),
            REG_RNG_SEED => {
                self.rng_seed.store(value as u64, Relaxed);
                // Release: the data plane that sees the new generation also sees the new seed.
                self.rng_seed_generation.fetch_add(1, std::sync::atomic::Ordering::Release);
            }
            id if CODEL_REGISTERS.contains(&id) => {
                self.codel[i].write(id, value);
            }
            id if RED_REGISTERS.contains(&id) => {
                self.red[i].write(id, value);
            }
            id if BEARER_UE_REGISTERS.contains(&id) => self.bearers[i].write(id, value),
            id if BEARER_PD_REGISTERS.contains(&id) => {
                let k = BEARER_PD_REGISTERS.iter().position(|&r| r == id).unwrap_or(0);
                self.bearer_pd[i][k].store(value as u64, Relaxed);
            }
            id if SLOT_REGISTERS.contains(&id) => {
                self.slot[i].write(id, value);
            }
            id if is_corr_register(id) => {
                self.corr[i].write(id, value);
            }
            id if TRACE_REGISTERS.contains(&id) => {
                self.trace[i].write(id, value);
            }
            REG_TRACE_OPPORTUNITY_MS => self.trace_opportunity_ms[i].store(value as u32, Relaxed),
            REG_TRACE_FIRST_AT => self.trace_first_at[i].store(value as u32, Relaxed),
            id if ONOFF_REGISTERS.contains(&id) => {
                self.onoff[i].write(id, value);
            }
            id if PIE_REGISTERS.contains(&id) => {
                self.pie[i].cell(id).expect("a pie register").store(value as u64, Relaxed);
            }
            id => {
                let written = self.radio.write(id, i, value);
                debug_assert!(written, "check_index validated the id");
            }
        }
        Ok(())
    }

    pub fn size(&self, reg_id: u32) -> Result<u32, StateError> {
        Ok(match reg_id {
            REG_NEXT_FREE_NS | REG_LAST_RELEASE_NS | REG_GE_STATE | REG_LOSS4_STATE | REG_BACKLOG_BYTES
            | REG_BACKLOG_PKTS => self.next_free_ns.len() as u32,
            REG_DIST_TABLE => self.dist_table.len() as u32,
            REG_RNG_SEED => 1,
            id if CODEL_REGISTERS.contains(&id) => self.codel.len() as u32,
            id if RED_REGISTERS.contains(&id) => self.red.len() as u32,
            id if BEARER_UE_REGISTERS.contains(&id) => self.bearers.len() as u32,
            id if BEARER_PD_REGISTERS.contains(&id) => self.bearer_pd.len() as u32,
            id if SLOT_REGISTERS.contains(&id) => self.slot.len() as u32,
            id if is_corr_register(id) => self.corr.len() as u32,
            id if TRACE_REGISTERS.contains(&id) => self.trace.len() as u32,
            REG_TRACE_OPPORTUNITY_MS => self.trace_opportunity_ms.len() as u32,
            REG_TRACE_FIRST_AT => self.trace_first_at.len() as u32,
            id if ONOFF_REGISTERS.contains(&id) => self.onoff.len() as u32,
            id if PIE_REGISTERS.contains(&id) => self.pie.len() as u32,
            id if self.radio.size(id).is_some() => self.radio.size(id).unwrap_or(0) as u32,
            _ => return Err(StateError::NotFound(format!("no register with id {reg_id:#x}"))),
        })
    }

    fn check_index(&self, reg_id: u32, index: u32) -> Result<usize, StateError> {
        let size = self.size(reg_id)?;
        if index >= size {
            let name = contract::register(reg_id).map(|r| r.name).unwrap_or("?");
            return Err(StateError::OutOfRange(format!(
                "index {index} out of range for register {name} (size {size})"
            )));
        }
        Ok(index as usize)
    }

    /// Back to the initial values: per-pd state zero, built-in distribution tables, start seed.
    pub fn reset(&self) {
        for a in self.next_free_ns.iter().chain(self.last_release_ns.iter()) {
            a.store(0, Relaxed);
        }
        for a in self.ge_state.iter().chain(self.loss4_state.iter()) {
            a.store(0, Relaxed);
        }
        for a in self.backlog_bytes.iter().chain(self.backlog_pkts.iter()) {
            a.store(0, Relaxed);
        }
        for c in self.codel.iter() {
            c.store(&Default::default());
        }
        for r in self.red.iter() {
            r.store(&Default::default());
        }
        for b in self.bearers.iter() {
            b.reset();
        }
        for cells in self.bearer_pd.iter() {
            for c in cells {
                c.store(0, Relaxed);
            }
        }
        for r in self.slot.iter() {
            r.store(&Default::default());
        }
        for c in self.corr.iter() {
            c.clear();
        }
        for r in self.trace.iter() {
            r.store(&Default::default());
        }
        for c in self.trace_opportunity_ms.iter().chain(self.trace_first_at.iter()) {
            c.store(0, Relaxed);
        }
        for o in self.onoff.iter() {
            o.clear();
        }
        for p in self.pie.iter() {
            p.store(&Default::default());
        }
        self.radio.reset();
        self.restore_dist();
        self.rng_seed.store(self.initial_seed, Relaxed);
        self.rng_seed_generation.fetch_add(1, std::sync::atomic::Ordering::Release);
    }
}
