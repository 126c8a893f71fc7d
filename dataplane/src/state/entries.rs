//! Control-side table store: the entry lists, their validation, and compilation into the data
//! plane's [`Snapshot`].
//!
//! Validation here is semantic (unknown table, action not allowed, parameter count/width, priority
//! rules, duplicates, capacity, profile range); the P4Runtime layer has already turned bytes into
//! integers. Entries keep their insertion sequence number, which orders reads and breaks
//! classifier priority ties.
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::contract::{self, *};
use crate::tables::hash::FxHashMap;
use crate::tables::{
    ClassKey, ClassOp, Classifier, Forward, Impairment, MacMap, PortMap, ProfileSel, ProfileTable, RadioParams,
    RadioTable, Rule, Snapshot,
};

use super::{ActionCall, Capacities, DefaultCookies, FieldMatch, StateError, TableEntry, UpdateKind};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EntryKey {
    matches: Vec<Option<FieldMatch>>,
    priority: i32,
}

struct Stored {
    seq: u64,
    entry: TableEntry,
}

struct Table {
    def: &'static TableDef,
    capacity: u32,
    /// Fx, not SipHash: hashing a classifier key (ten optional 128-bit matches) with SipHash was
    /// a tenth of an insert's cost, and the keys come from the authenticated primary controller,
    /// so HashDoS resistance buys nothing (as for the data plane's maps, tables/hash.rs).
    entries: FxHashMap<EntryKey, Stored>,
    default: ActionCall,
    default_cookies: DefaultCookies,
}

pub struct TableStore {
    caps: Capacities,
    tables: Vec<Table>,
    seq: u64,
    /// The classifier changes of the batch being applied (compiled incrementally at publish).
    class_ops: Vec<ClassOp>,
    /// `clear` ran in this batch: the classifier is rebuilt from the entry list.
    class_rebuild: bool,
    /// WHY_TWO_COPIES: the classifier published before the current one, and the ops it lacks.
    /// Once the data plane has let go of it (it holds a snapshot for one loop turn, never while
    /// it sleeps), the next batch replays those ops and its own on it and publishes it: a batch
    /// costs O(its size) instead of a rebuild of up to 64k entries, and a published classifier is
    /// never changed, so a packet sees a batch whole or not at all (the left-right scheme).
    class_spare: Option<(Arc<Classifier>, Vec<ClassOp>)>,
}

/// How long a batch waits for the data plane to let go of the spare classifier before copying
/// the published one instead (a loop turn is microseconds; this only bounds odd cases, such as a
/// test holding an old snapshot).
const SPARE_WAIT: Duration = Duration::from_millis(2);

fn invalid(msg: String) -> StateError {
    StateError::InvalidArgument(msg)
}

fn p4_default(def: &TableDef) -> ActionCall {
    ActionCall { action_id: def.default_action_id, params: def.default_params.to_vec() }
}

fn needs_priority(def: &TableDef) -> bool {
    def.keys.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range))
}

impl TableStore {
    pub fn new(caps: Capacities) -> Self {
        let tables = TABLES
            .iter()
            .map(|def| Table {
                def,
                capacity: caps.table_size(def.id).expect("contract table"),
                entries: FxHashMap::default(),
                default: p4_default(def),
                default_cookies: DefaultCookies::default(),
            })
            .collect();
        TableStore { caps, tables, seq: 0, class_ops: Vec::new(), class_rebuild: false, class_spare: None }
    }

    fn index(&self, table_id: u32) -> Result<usize, StateError> {
        self.tables
            .iter()
            .position(|t| t.def.id == table_id)
            .ok_or_else(|| StateError::NotFound(format!("no table with id {table_id:#x}")))
    }

    /// Position of a table in [`TABLES`] order (used to mark tables touched by a batch).
    pub fn table_index(&self, table_id: u32) -> Option<usize> {
        self.index(table_id).ok()
    }

    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// Canonical form of the match fields: checked against the key definitions, don't-care
    /// matches (ternary mask 0, full range) turned into `None` so that equal entries compare equal.
    fn canonical_matches(
        &self,
        def: &TableDef,
        matches: &[Option<FieldMatch>],
    ) -> Result<Vec<Option<FieldMatch>>, StateError> {
        if matches.len() != def.keys.len() {
            return Err(invalid(format!(
                "table {} has {} match fields, entry gives {}",
                def.name,
                def.keys.len(),
                matches.len()
            )));
        }
        let mut out = Vec::with_capacity(matches.len());
        for (k, m) in def.keys.iter().zip(matches) {
            let max = max_value(k.bits);
            let c = match (k.kind, m) {
                (MatchKind::Exact, Some(FieldMatch::Exact(v))) => {
                    if *v > max {
                        return Err(invalid(format!("{}: value {v:#x} exceeds {} bits", k.name, k.bits)));
                    }
                    Some(FieldMatch::Exact(*v))
                }
                (MatchKind::Exact, None) => {
                    return Err(invalid(format!("{}: exact match field is required", k.name)));
                }
                (MatchKind::Ternary, Some(FieldMatch::Ternary { value, mask })) => {
                    if *value > max || *mask > max {
                        return Err(invalid(format!("{}: value/mask exceed {} bits", k.name, k.bits)));
                    }
                    if value & !mask != 0 {
                        return Err(invalid(format!("{}: value {value:#x} has bits outside mask {mask:#x}", k.name)));
                    }
                    if *mask == 0 {
                        None
                    } else {
                        Some(FieldMatch::Ternary { value: *value, mask: *mask })
                    }
                }
                (MatchKind::Range, Some(FieldMatch::Range { lo, hi })) => {
                    if *hi > max || lo > hi {
                        return Err(invalid(format!("{}: range [{lo}, {hi}] invalid for {} bits", k.name, k.bits)));
                    }
                    if *lo == 0 && *hi == max {
                        None
                    } else {
                        Some(FieldMatch::Range { lo: *lo, hi: *hi })
                    }
                }
                (MatchKind::Ternary | MatchKind::Range | MatchKind::Lpm, None) => None,
                (MatchKind::Lpm, Some(FieldMatch::Lpm { value, prefix_len })) => {
                    if *prefix_len > k.bits || *value > max {
                        return Err(invalid(format!("{}: invalid lpm", k.name)));
                    }
                    if *prefix_len == 0 {
                        None
                    } else {
                        Some(FieldMatch::Lpm { value: *value, prefix_len: *prefix_len })
                    }
                }
                (kind, Some(other)) => {
                    return Err(invalid(format!("{}: match kind {kind:?} expected, got {other:?}", k.name)));
                }
            };
            out.push(c);
        }
        Ok(out)
    }

    /// Checks an action for a table: allowed, parameter count and widths, semantic ranges.
    fn check_action(&self, def: &TableDef, call: &ActionCall, as_default: bool) -> Result<(), StateError> {
        if !def.action_ids.contains(&call.action_id) {
            return Err(invalid(format!(
                "action {:#x} ({}) is not an action of table {}",
                call.action_id,
                contract::action(call.action_id).map_or("unknown", |a| a.name),
                def.name
            )));
        }
        let scope = action_scope(def.id, call.action_id);
        let adef = contract::action(call.action_id).expect("table references known actions");
        if !as_default && scope == ActionScope::DefaultOnly {
            return Err(invalid(format!("{} may only be the default action of {}", adef.name, def.name)));
        }
        if as_default && scope == ActionScope::TableOnly {
            return Err(invalid(format!("{} may not be the default action of {}", adef.name, def.name)));
        }
        if call.params.len() != adef.params.len() {
            return Err(invalid(format!(
                "{} takes {} params, got {}",
                adef.name,
                adef.params.len(),
                call.params.len()
            )));
        }
        for (p, v) in adef.params.iter().zip(&call.params) {
            if *v > max_value(p.bits) {
                return Err(invalid(format!("{}.{}: value {v:#x} exceeds {} bits", adef.name, p.name, p.bits)));
            }
        }
        let is_sel = matches!(call.action_id, ACTION_SET_PROFILE | ACTION_SET_PROFILE_UE_BY_ADDR);
        if is_sel && call.params[0] >= self.caps.profiles as u128 {
            return Err(StateError::OutOfRange(format!(
                "{}.profile_id {} >= {} (--profiles)",
                adef.name, call.params[0], self.caps.profiles
            )));
        }
        // set_profile's ue_id is not checked (a UE past the radio arrays simply has no radio, as in
        // p4src); an entry that derives UE ids from addresses must not reach past them, since a
        // mask that does is a configuration mistake that would silently leave hosts without radio.
        if call.action_id == ACTION_SET_PROFILE_UE_BY_ADDR {
            let (base, mask) = (call.params[2], call.params[3]);
            if base + mask >= self.caps.ue_ids as u128 {
                return Err(StateError::OutOfRange(format!(
                    "{}: ue_base {base} + ue_mask {mask:#x} reaches UE {} >= {} (--ue-ids)",
                    adef.name,
                    base + mask,
                    self.caps.ue_ids
                )));
            }
        }
        // A trace must lie inside the trace registers: the data plane reads its cells without checks
        // (p4src cannot check them either).
        if call.action_id == ACTION_SET_IMPAIRMENT && call.params[imp::TRACE_LEN] != 0 {
            let g = |i: usize| call.params[i];
            let (base, len, ms_base, period) =
                (g(imp::TRACE_BASE), g(imp::TRACE_LEN), g(imp::TRACE_MS_BASE), g(imp::TRACE_PERIOD_MS));
            if period == 0
                || base + len > REG_TRACE_OPPORTUNITY_MS_SIZE as u128
                || ms_base + period + 1 > REG_TRACE_FIRST_AT_SIZE as u128
            {
                return Err(StateError::OutOfRange(format!(
                    "{}: trace_base {base} + trace_len {len} must stay within {} cells and trace_ms_base \
                     {ms_base} + trace_period_ms {period} + 1 (above 0) within {}",
                    adef.name, REG_TRACE_OPPORTUNITY_MS_SIZE, REG_TRACE_FIRST_AT_SIZE
                )));
            }
        }
        if call.action_id == ACTION_SET_RADIO && call.params[rp::MODEL] > radio_model::GPRS as u128 {
            return Err(invalid(format!(
                "{}.model {} is not a radio model (0 none, 1 umts, 2 lte, 3 gprs)",
                adef.name,
                call.params[rp::MODEL]
            )));
        }
        Ok(())
    }

    fn check_key_ranges(&self, def: &TableDef, matches: &[Option<FieldMatch>]) -> Result<(), StateError> {
        if def.id == TABLE_PROFILE || def.id == TABLE_RADIO_PROFILE {
            if let Some(FieldMatch::Exact(pid)) = matches[0] {
                if pid >= self.caps.profiles as u128 {
                    return Err(StateError::OutOfRange(format!(
                        "profile_id {pid} >= {} (--profiles)",
                        self.caps.profiles
                    )));
                }
            }
        }
        Ok(())
    }

    /// Applies one update to the entry lists. Returns the index of the touched table.
    pub fn apply(&mut self, kind: UpdateKind, entry: TableEntry) -> Result<usize, StateError> {
        let ti = self.index(entry.table_id)?;
        let def = self.tables[ti].def;
        let matches = self.canonical_matches(def, &entry.matches)?;
        if needs_priority(def) {
            if entry.priority <= 0 {
                return Err(invalid(format!(
                    "table {} has ternary/range keys: entries need a priority > 0, got {}",
                    def.name, entry.priority
                )));
            }
        } else if entry.priority != 0 {
            return Err(invalid(format!("table {} is exact-only: priority must be 0", def.name)));
        }
        self.check_key_ranges(def, &matches)?;
        let key = EntryKey { matches: matches.clone(), priority: entry.priority };
        if kind != UpdateKind::Delete {
            self.check_action(def, &entry.action, false)?;
        }
        let t = &mut self.tables[ti];
        match kind {
            UpdateKind::Insert => {
                if t.entries.contains_key(&key) {
                    return Err(StateError::AlreadyExists(format!("entry already in {}", def.name)));
                }
                if t.entries.len() as u32 >= t.capacity {
                    return Err(StateError::ResourceExhausted(format!(
                        "table {} is full ({} entries)",
                        def.name, t.capacity
                    )));
                }
                self.seq += 1;
                let stored = TableEntry { matches, ..entry };
                if def.id == TABLE_CLASSIFIER {
                    self.class_ops.push(ClassOp::Insert(rule(self.seq, &stored)));
                }
                t.entries.insert(key, Stored { seq: self.seq, entry: stored });
            }
            UpdateKind::Modify => {
                let Some(s) = t.entries.get_mut(&key) else {
                    return Err(StateError::NotFound(format!("no such entry in {}", def.name)));
                };
                s.entry.action = entry.action;
                s.entry.controller_metadata = entry.controller_metadata;
                s.entry.metadata = entry.metadata;
                if def.id == TABLE_CLASSIFIER {
                    self.class_ops.push(ClassOp::Modify(rule(s.seq, &s.entry)));
                }
            }
            UpdateKind::Delete => {
                let Some(s) = t.entries.remove(&key) else {
                    return Err(StateError::NotFound(format!("no such entry in {}", def.name)));
                };
                if def.id == TABLE_CLASSIFIER {
                    self.class_ops.push(ClassOp::Remove(rule(s.seq, &s.entry)));
                }
            }
        }
        Ok(ti)
    }

    /// `action` None resets the default entry to the P4 program's, cookies included (P4Runtime,
    /// "Default Entry": a reset also resets controller_metadata and metadata).
    pub fn set_default(
        &mut self,
        table_id: u32,
        action: Option<ActionCall>,
        cookies: DefaultCookies,
    ) -> Result<usize, StateError> {
        let ti = self.index(table_id)?;
        let def = self.tables[ti].def;
        let reset = action.is_none();
        let action = match action {
            None => p4_default(def),
            Some(a) => {
                self.check_default(table_id, &a)?;
                a
            }
        };
        self.tables[ti].default = action;
        self.tables[ti].default_cookies = if reset { DefaultCookies::default() } else { cookies };
        Ok(ti)
    }

    /// Whether `action` may become the default action of `table_id`, without setting it.
    pub fn check_default(&self, table_id: u32, action: &ActionCall) -> Result<(), StateError> {
        let def = self.tables[self.index(table_id)?].def;
        if default_is_const(table_id) && *action != p4_default(def) {
            return Err(invalid(format!("the default action of {} is const", def.name)));
        }
        self.check_action(def, action, true)
    }

    /// The stored entry with `entry`'s match fields and priority, if any.
    pub fn find(&self, entry: &TableEntry) -> Result<Option<TableEntry>, StateError> {
        let t = &self.tables[self.index(entry.table_id)?];
        let matches = self.canonical_matches(t.def, &entry.matches)?;
        let key = EntryKey { matches, priority: entry.priority };
        Ok(t.entries.get(&key).map(|s| s.entry.clone()))
    }

    pub fn len(&self, table_id: u32) -> Result<usize, StateError> {
        Ok(self.tables[self.index(table_id)?].entries.len())
    }

    pub fn default_action(&self, table_id: u32) -> Result<ActionCall, StateError> {
        Ok(self.tables[self.index(table_id)?].default.clone())
    }

    pub fn default_cookies(&self, table_id: u32) -> Result<DefaultCookies, StateError> {
        Ok(self.tables[self.index(table_id)?].default_cookies.clone())
    }

    pub fn read(&self, table_id: u32) -> Result<Vec<TableEntry>, StateError> {
        let selected: Vec<&Table> =
            if table_id == 0 { self.tables.iter().collect() } else { vec![&self.tables[self.index(table_id)?]] };
        let mut out = Vec::new();
        for t in selected {
            let mut v: Vec<&Stored> = t.entries.values().collect();
            v.sort_by_key(|s| s.seq);
            out.extend(v.into_iter().map(|s| s.entry.clone()));
        }
        Ok(out)
    }

    pub fn clear(&mut self) {
        for t in &mut self.tables {
            t.entries.clear();
            t.default = p4_default(t.def);
            t.default_cookies = DefaultCookies::default();
        }
        self.class_ops.clear();
        self.class_rebuild = true;
    }

    /// The classifier for the next snapshot: `old` (the published one) plus this batch's ops.
    fn next_classifier(&mut self, old: &Arc<Classifier>, wake: &dyn Fn()) -> Arc<Classifier> {
        let ops = std::mem::take(&mut self.class_ops);
        if std::mem::take(&mut self.class_rebuild) {
            self.class_spare = None;
            let t = &self.tables[self.index(TABLE_CLASSIFIER).expect("contract table")];
            let rules: Vec<Rule> = t.entries.values().map(|e| rule(e.seq, &e.entry)).collect();
            return Arc::new(Classifier::build(&rules));
        }
        if ops.is_empty() {
            return old.clone();
        }
        let reused = self.class_spare.take().and_then(|(mut spare, missing)| {
            reclaim(&mut spare, wake).then(|| {
                Arc::get_mut(&mut spare).expect("reclaimed").apply(&missing);
                spare
            })
        });
        // First batch, or the data plane still reads the spare: copy (O(table), rare).
        let mut next = reused.unwrap_or_else(|| Arc::new(Classifier::clone(old)));
        Arc::get_mut(&mut next).expect("unpublished").apply(&ops);
        self.class_spare = Some((old.clone(), ops));
        next
    }

    /// A snapshot equal to `old` except for the tables whose index is set in `touched`. `wake`
    /// makes the data plane start a loop turn (which lets go of the snapshot it holds).
    pub fn compile(&mut self, old: &Snapshot, touched: &[bool], wake: &dyn Fn()) -> Snapshot {
        let mut s = old.clone();
        if touched.get(self.index(TABLE_CLASSIFIER).expect("contract table")).copied().unwrap_or(false) {
            s.classifier = self.next_classifier(&old.classifier, wake);
            let t = &self.tables[self.index(TABLE_CLASSIFIER).expect("contract table")];
            s.classifier_default = profile_sel(&t.default);
        }

        for (ti, t) in self.tables.iter().enumerate() {
            if !touched.get(ti).copied().unwrap_or(false) {
                continue;
            }
            let entries = || t.entries.values();
            match t.def.id {
                TABLE_PORT_MAP => {
                    s.port_map = Arc::new(PortMap::new(
                        entries().map(|e| (exact(&e.entry.matches[0]) as u16, forward(&e.entry.action))),
                    ));
                    s.port_map_default = forward(&t.default);
                }
                TABLE_L2_FWD => {
                    s.l2_fwd = Arc::new(MacMap::new(
                        entries().map(|e| (exact(&e.entry.matches[0]) as u64, forward(&e.entry.action))),
                    ));
                }
                TABLE_L2_LEARN => {
                    s.l2_learn = Arc::new(MacMap::new(entries().map(|e| (exact(&e.entry.matches[0]) as u64, ()))));
                    s.learn_on_miss = t.default.action_id == ACTION_LEARN;
                }
                TABLE_CLASSIFIER => {} // above: incremental
                TABLE_PROFILE => {
                    s.profiles = Arc::new(ProfileTable::new(
                        self.caps.pds() as usize,
                        entries().filter(|e| e.entry.action.action_id == ACTION_SET_IMPAIRMENT).map(|e| {
                            let pid = exact(&e.entry.matches[0]) as u32;
                            let dir = exact(&e.entry.matches[1]) as u32;
                            (pid * 2 + dir, Impairment::from_params(&e.entry.action.params))
                        }),
                    ));
                    s.profile_default = (t.default.action_id == ACTION_SET_IMPAIRMENT)
                        .then(|| Impairment::from_params(&t.default.params));
                }
                TABLE_RADIO_PROFILE => {
                    s.radios = Arc::new(RadioTable::new(
                        self.caps.profiles as usize,
                        entries().filter(|e| e.entry.action.action_id == ACTION_SET_RADIO).map(|e| {
                            (exact(&e.entry.matches[0]) as u32, RadioParams::from_params(&e.entry.action.params))
                        }),
                    ));
                    s.radio_default =
                        (t.default.action_id == ACTION_SET_RADIO).then(|| RadioParams::from_params(&t.default.params));
                }
                _ => {}
            }
        }
        s
    }
}

/// Waits (bounded by [`SPARE_WAIT`]) until nobody but the store holds `spare`.
fn reclaim(spare: &mut Arc<Classifier>, wake: &dyn Fn()) -> bool {
    if Arc::get_mut(spare).is_some() {
        return true;
    }
    wake();
    let t0 = Instant::now();
    while t0.elapsed() < SPARE_WAIT {
        std::thread::yield_now();
        if Arc::get_mut(spare).is_some() {
            return true;
        }
    }
    false
}

fn exact(m: &Option<FieldMatch>) -> u128 {
    match m {
        Some(FieldMatch::Exact(v)) => *v,
        _ => 0,
    }
}

fn forward(a: &ActionCall) -> Forward {
    match a.action_id {
        ACTION_SET_EGRESS_PORT => Forward::Port(a.params[0] as u16),
        ACTION_SEND_TO_CPU => Forward::Cpu,
        _ => Forward::Drop,
    }
}

fn profile_sel(a: &ActionCall) -> ProfileSel {
    let g = |i: usize| a.params.get(i).copied().unwrap_or(0);
    let sel = ProfileSel { profile_id: g(0) as u16, direction: g(1) as u8, ue_id: g(2) as u32, ..Default::default() };
    if a.action_id == ACTION_SET_PROFILE_UE_BY_ADDR {
        return ProfileSel { ue_mask: g(3) as u32, ue_from_dst: g(4) != 0, ..sel };
    }
    sel
}

/// The classifier rule of an entry (for the write-path figures test).
#[cfg(test)]
pub(super) fn test_rule(seq: u64, e: &TableEntry) -> Rule {
    rule(seq, e)
}

fn rule(seq: u64, e: &TableEntry) -> Rule {
    let mut value = ClassKey::default();
    let mut mask = ClassKey::default();
    let mut sport = (0u16, u16::MAX);
    let mut dport = (0u16, u16::MAX);
    for (i, m) in e.matches.iter().enumerate() {
        let (v, mk) = match m {
            Some(FieldMatch::Ternary { value, mask }) => (*value, *mask),
            Some(FieldMatch::Exact(v)) => (*v, u128::MAX),
            Some(FieldMatch::Range { lo, hi }) => {
                if i == ck::L4_SRC_PORT {
                    sport = (*lo as u16, *hi as u16);
                } else if i == ck::L4_DST_PORT {
                    dport = (*lo as u16, *hi as u16);
                }
                continue;
            }
            _ => continue,
        };
        match i {
            ck::INGRESS_PORT => (value.ingress_port, mask.ingress_port) = (v as u16, mk as u16 & 0x1ff),
            ck::ETHER_TYPE => (value.ether_type, mask.ether_type) = (v as u16, mk as u16),
            ck::IPV4_SRC => (value.ipv4_src, mask.ipv4_src) = (v as u32, mk as u32),
            ck::IPV4_DST => (value.ipv4_dst, mask.ipv4_dst) = (v as u32, mk as u32),
            ck::IPV6_SRC => (value.ipv6_src, mask.ipv6_src) = (v, mk),
            ck::IPV6_DST => (value.ipv6_dst, mask.ipv6_dst) = (v, mk),
            ck::IP_PROTO => (value.ip_proto, mask.ip_proto) = (v as u8, mk as u8),
            ck::DSCP => (value.dscp, mask.dscp) = (v as u8, mk as u8 & 0x3f),
            _ => {}
        }
    }
    Rule { value, mask, sport, dport, priority: e.priority, seq, result: profile_sel(&e.action) }
}
