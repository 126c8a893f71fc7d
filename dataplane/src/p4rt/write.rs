//! The Write RPC's updates: decode each into an operation on the store, then apply the batch with
//! the requested atomicity.
//!
//! - CONTINUE_ON_ERROR: every valid update is applied; each update gets its own status.
//! - ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC: all or nothing. Every update is decoded and checked
//!   first (including against the current table contents: duplicates, missing entries, capacity);
//!   if any fails, nothing is applied and the updates that were fine are reported ABORTED. The
//!   table updates of a batch reach the data plane as one snapshot, so a DATAPLANE_ATOMIC batch of
//!   table entries is atomic for packets. Default entries, registers and counters are separate
//!   stores, so a DATAPLANE_ATOMIC batch that contains them is UNIMPLEMENTED (the spec's answer for
//!   batches a target cannot apply atomically).
//!
//! WHY_SKIP_ZEROS: a wildcard write of 0 to a register or counter array (a controller's reset)
//! skips the cells that already hold 0. The per-UE radio arrays are lazily mapped (state/lazy.rs):
//! storing zeros over a million UEs never seen would commit hundreds of MB for nothing, while
//! reading an untouched page only maps the kernel's shared zero page.

use std::collections::HashMap;

use tonic::Code;

use crate::contract::{self, REG_RNG_SEED};
use crate::state::{SwitchControl, TableEntry, UpdateKind};

use super::codec::decode_uint;
use super::digest::{DigestConfig, DigestEngine};
use super::entries::{decode_update, TableOp};
use super::error::{P4Error, P4Result};
use super::proto::p4::v1 as pb;

/// One decoded update.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Table(TableOp),
    /// index None = every cell.
    Register {
        id: u32,
        index: Option<u32>,
        value: u128,
    },
    /// index None = every cell; data None = leave unchanged.
    Counter {
        id: u32,
        index: Option<u32>,
        data: Option<(u64, u64)>,
    },
    Digest {
        kind: UpdateKind,
        id: u32,
        config: Option<DigestConfig>,
    },
}

fn update_kind(t: i32) -> P4Result<UpdateKind> {
    match pb::update::Type::try_from(t) {
        Ok(pb::update::Type::Insert) => Ok(UpdateKind::Insert),
        Ok(pb::update::Type::Modify) => Ok(UpdateKind::Modify),
        Ok(pb::update::Type::Delete) => Ok(UpdateKind::Delete),
        _ => Err(P4Error::invalid(format!("update type {t} is not INSERT, MODIFY or DELETE"))),
    }
}

/// Validate an optional array index against the array's runtime size.
pub(super) fn check_index(index: &Option<pb::Index>, size: u32, what: &str) -> P4Result<Option<u32>> {
    match index {
        None => Ok(None),
        Some(i) if i.index < 0 => Err(P4Error::invalid(format!("{what}: negative index {}", i.index))),
        Some(i) if i.index >= size as i64 => Err(P4Error::out_of_range(format!(
            "{what}: index {} out of range (size {size}, valid 0..={})",
            i.index,
            size.saturating_sub(1)
        ))),
        Some(i) => Ok(Some(i.index as u32)),
    }
}

pub fn decode_op(control: &SwitchControl, u: &pb::Update) -> P4Result<Op> {
    use pb::entity::Entity as E;
    let kind = update_kind(u.r#type)?;
    let entity =
        u.entity.as_ref().and_then(|e| e.entity.as_ref()).ok_or_else(|| P4Error::invalid("update has no entity"))?;
    match entity {
        E::TableEntry(te) => Ok(Op::Table(decode_update(kind, te)?)),
        E::RegisterEntry(r) => {
            let def = contract::register(r.register_id).ok_or_else(|| {
                P4Error::invalid(format!("unknown register id {} (0x{:08x})", r.register_id, r.register_id))
            })?;
            let what = format!("register {}", def.name);
            if kind != UpdateKind::Modify {
                return Err(P4Error::invalid(format!("{what}: registers can only be modified (use MODIFY)")));
            }
            let size = control.register_size(def.id)?;
            let index = check_index(&r.index, size, &what)?;
            let value = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
                Some(pb::p4_data::Data::Bitstring(b)) => decode_uint(b, def.bits, &format_args!("{what} value"))?,
                Some(_) => {
                    return Err(P4Error::invalid(format!("{what}: data must be a bitstring (bit<{}>)", def.bits)))
                }
                None => return Err(P4Error::invalid(format!("{what}: data is missing"))),
            };
            Ok(Op::Register { id: def.id, index, value })
        }
        E::CounterEntry(c) => {
            let def = contract::counter(c.counter_id).ok_or_else(|| {
                P4Error::invalid(format!("unknown counter id {} (0x{:08x})", c.counter_id, c.counter_id))
            })?;
            let what = format!("counter {}", def.name);
            if kind != UpdateKind::Modify {
                return Err(P4Error::invalid(format!("{what}: counters can only be modified (use MODIFY)")));
            }
            let size = control.counter_size(def.id)?;
            let index = check_index(&c.index, size, &what)?;
            let data = match &c.data {
                None => None,
                Some(d) if d.byte_count < 0 || d.packet_count < 0 => {
                    return Err(P4Error::invalid(format!("{what}: counts must not be negative")))
                }
                Some(d) => Some((d.byte_count as u64, d.packet_count as u64)),
            };
            Ok(Op::Counter { id: def.id, index, data })
        }
        E::DigestEntry(d) => {
            let def = contract::digest(d.digest_id).ok_or_else(|| {
                P4Error::invalid(format!("unknown digest id {} (0x{:08x})", d.digest_id, d.digest_id))
            })?;
            let config = match (&d.config, kind) {
                (_, UpdateKind::Delete) => None,
                (Some(c), _) => {
                    let c = DigestConfig {
                        max_timeout_ns: c.max_timeout_ns,
                        max_list_size: c.max_list_size,
                        ack_timeout_ns: c.ack_timeout_ns,
                    };
                    c.validate().map_err(|e| e.context(format_args!("digest {}", def.name)))?;
                    Some(c)
                }
                (None, _) => return Err(P4Error::invalid(format!("digest {}: config is required", def.name))),
            };
            Ok(Op::Digest { kind, id: def.id, config })
        }
        E::DirectCounterEntry(_) => Err(P4Error::invalid("this target has no direct counters")),
        E::DirectMeterEntry(_) => Err(P4Error::invalid("this target has no direct meters")),
        E::MeterEntry(m) => {
            Err(P4Error::invalid(format!("unknown meter id {} (this target has no meters)", m.meter_id)))
        }
        E::ValueSetEntry(v) => {
            Err(P4Error::invalid(format!("unknown value set id {} (this target has no value sets)", v.value_set_id)))
        }
        E::ExternEntry(x) => {
            Err(P4Error::invalid(format!("unknown extern type {} (this target has no externs)", x.extern_type_id)))
        }
        E::ActionProfileMember(_) | E::ActionProfileGroup(_) => {
            Err(P4Error::unimplemented("action profiles are not supported (this target has none)"))
        }
        E::PacketReplicationEngineEntry(_) => Err(P4Error::unimplemented(
            "multicast groups and clone sessions cannot be written: this target duplicates packets natively \
                 (no clone session needed) and has no multicast; reads find none",
        )),
    }
}

/// A byte string identifying a match entry within its table (match fields + priority).
fn entry_key(e: &TableEntry) -> Vec<u8> {
    use crate::state::FieldMatch as F;
    let mut k = Vec::with_capacity(e.matches.len() * 33 + 4);
    k.extend_from_slice(&e.priority.to_be_bytes());
    for m in &e.matches {
        match m {
            None => k.push(0),
            Some(F::Exact(v)) => {
                k.push(1);
                k.extend_from_slice(&v.to_be_bytes());
            }
            Some(F::Ternary { value, mask }) => {
                k.push(2);
                k.extend_from_slice(&value.to_be_bytes());
                k.extend_from_slice(&mask.to_be_bytes());
            }
            Some(F::Range { lo, hi }) => {
                k.push(3);
                k.extend_from_slice(&lo.to_be_bytes());
                k.extend_from_slice(&hi.to_be_bytes());
            }
            Some(F::Lpm { value, prefix_len }) => {
                k.push(4);
                k.extend_from_slice(&value.to_be_bytes());
                k.extend_from_slice(&prefix_len.to_be_bytes());
            }
        }
    }
    k
}

/// Table contents as of the start of the batch plus the batch's changes so far. Only the entries
/// the batch names are looked up in the store (one hash probe each), never a whole table: a
/// one-entry MODIFY into a 64k-entry classifier costs the same as into an empty one.
struct Shadow<'a> {
    control: &'a SwitchControl,
    /// (table, entry key) -> the entry as the batch left it (`None`: deleted).
    changed: HashMap<(u32, Vec<u8>), Option<TableEntry>>,
    /// Per table: its size in the store at the start, plus inserts minus deletes so far.
    len: HashMap<u32, usize>,
}

impl<'a> Shadow<'a> {
    fn get(&self, entry: &TableEntry, key: &[u8]) -> P4Result<Option<TableEntry>> {
        if let Some(e) = self.changed.get(&(entry.table_id, key.to_vec())) {
            return Ok(e.clone());
        }
        Ok(self.control.find_entry(entry)?)
    }

    fn len(&mut self, table_id: u32) -> P4Result<&mut usize> {
        if !self.len.contains_key(&table_id) {
            let n = self.control.table_len(table_id)?;
            self.len.insert(table_id, n);
        }
        Ok(self.len.get_mut(&table_id).expect("just inserted"))
    }
}

fn describe_table(table_id: u32) -> &'static str {
    contract::table(table_id).map_or("?", |t| t.name)
}

/// Check one table update against the shadow and record its effect there; returns the update to
/// hand to the store (MODIFY without an action keeps the stored action) and the entry it replaces
/// (for rollback).
fn simulate(
    shadow: &mut Shadow,
    kind: UpdateKind,
    mut entry: TableEntry,
    action_given: bool,
    capacity: u32,
) -> P4Result<((UpdateKind, TableEntry), Option<TableEntry>)> {
    let key = entry_key(&entry);
    let name = describe_table(entry.table_id);
    let old = shadow.get(&entry, &key)?;
    let len = *shadow.len(entry.table_id)?;
    match (kind, &old) {
        (UpdateKind::Insert, Some(_)) => {
            return Err(P4Error::new(
                Code::AlreadyExists,
                format!("table {name}: an entry with this match key and priority exists"),
            ))
        }
        (UpdateKind::Insert, None) if len >= capacity as usize => {
            return Err(P4Error::new(Code::ResourceExhausted, format!("table {name} is full ({capacity} entries)")))
        }
        (UpdateKind::Modify | UpdateKind::Delete, None) => {
            return Err(P4Error::not_found(format!("table {name}: no entry with this match key and priority")))
        }
        _ => {}
    }
    if kind == UpdateKind::Modify && !action_given {
        entry.action = old.as_ref().expect("checked above").action.clone();
    }
    let n = shadow.len(entry.table_id)?;
    match kind {
        UpdateKind::Delete => {
            *n -= 1;
            shadow.changed.insert((entry.table_id, key), None);
        }
        UpdateKind::Insert => {
            *n += 1;
            shadow.changed.insert((entry.table_id, key), Some(entry.clone()));
        }
        UpdateKind::Modify => {
            shadow.changed.insert((entry.table_id, key), Some(entry.clone()));
        }
    }
    Ok(((kind, entry), old))
}

/// The inverse of an applied table update.
fn inverse(kind: UpdateKind, entry: &TableEntry, old: Option<TableEntry>) -> (UpdateKind, TableEntry) {
    match (kind, old) {
        (UpdateKind::Insert, _) => (UpdateKind::Delete, entry.clone()),
        (UpdateKind::Modify, Some(o)) => (UpdateKind::Modify, o),
        (UpdateKind::Delete, Some(o)) => (UpdateKind::Insert, o),
        (_, None) => (UpdateKind::Delete, entry.clone()),
    }
}

/// Every update that did not fail itself becomes ABORTED. Its message stays short: it is repeated
/// once per update in the batch's trailer, and the status message already names the update that
/// failed and the atomicity.
fn aborted(results: Vec<P4Result<()>>) -> Vec<P4Result<()>> {
    results.into_iter().map(|r| r.and(Err(P4Error::new(Code::Aborted, "not applied")))).collect()
}

/// Apply a decoded batch. `atomic` selects all-or-nothing; `capacity(table_id)` is the runtime
/// size of a table. The caller holds the write lock.
pub fn apply(
    control: &SwitchControl,
    digests: &mut DigestEngine,
    ops: Vec<P4Result<Op>>,
    atomic: Option<&str>,
    capacity: impl Fn(u32) -> u32,
) -> Vec<P4Result<()>> {
    if atomic.is_some() && ops.iter().any(|o| o.is_err()) {
        return aborted(ops.into_iter().map(|o| o.map(|_| ())).collect());
    }
    let mut results: Vec<P4Result<()>> = ops.iter().map(|o| o.as_ref().map(|_| ()).map_err(Clone::clone)).collect();
    let mut shadow = Shadow { control, changed: HashMap::new(), len: HashMap::new() };

    // Table entries: checked (always for MODIFY without an action, for every entry when atomic)
    // and then handed to the store as one batch. The entries are moved, not copied, out of the
    // decoded ops: a batch of 500 inserts would otherwise clone each entry twice (profile:
    // docs/dataplane.md, "P4Runtime writes").
    let mut table_pos: Vec<usize> = Vec::new();
    let mut table_batch: Vec<(UpdateKind, TableEntry)> = Vec::new();
    let mut replaced: Vec<Option<TableEntry>> = Vec::new();
    let mut rest: Vec<(usize, Op)> = Vec::new();
    for (i, op) in ops.into_iter().enumerate() {
        match op {
            Ok(Op::Table(TableOp::Entry { kind, entry, action_given })) => {
                if atomic.is_some() || (kind == UpdateKind::Modify && !action_given) {
                    let cap = capacity(entry.table_id);
                    match simulate(&mut shadow, kind, entry, action_given, cap) {
                        Ok((upd, old)) => {
                            table_pos.push(i);
                            table_batch.push(upd);
                            replaced.push(old);
                        }
                        Err(e) => results[i] = Err(e),
                    }
                } else {
                    table_pos.push(i);
                    table_batch.push((kind, entry));
                    replaced.push(None);
                }
            }
            Ok(op) => rest.push((i, op)),
            Err(_) => {}
        }
    }
    // Digest configs are ours: check them in order on a copy first. A default entry's action is
    // range-checked by the store (profile ids, radio models, ...) only when it is set, after the
    // table batch: an all-or-nothing batch checks it first, since that batch cannot be undone
    // once a default entry fails (ROLLBACK_ON_ERROR applied the rest and said "none applied").
    let mut trial = digests.clone_configs();
    for (i, op) in &rest {
        let checked = match op {
            Op::Digest { kind, id, config } => trial.apply_config(*kind, *id, *config),
            Op::Table(TableOp::Default { table_id, action: Some(a), .. }) if atomic.is_some() => {
                control.check_default_action(*table_id, a).map_err(Into::into)
            }
            _ => Ok(()),
        };
        if let Err(e) = checked {
            results[*i] = Err(e);
        }
    }
    if atomic.is_some() && results.iter().any(|r| r.is_err()) {
        return aborted(results);
    }

    // Apply. Only the table batch can still fail (if the store disagrees with the simulation).
    if !table_batch.is_empty() {
        // All or nothing needs the updates again to undo them; the common case does not.
        let kept = atomic.is_some().then(|| table_batch.clone());
        let outcome = control.write_tables(table_batch);
        let failed = outcome.iter().any(|r| r.is_err());
        if let (Some(kept), true) = (kept, failed) {
            // Undo what the store did apply, newest first, then report.
            let undo: Vec<(UpdateKind, TableEntry)> = kept
                .iter()
                .zip(replaced)
                .zip(&outcome)
                .rev()
                .filter(|(_, r)| r.is_ok())
                .map(|(((k, e), old), _)| inverse(*k, e, old))
                .collect();
            let _ = control.write_tables(undo);
            for (i, r) in table_pos.iter().zip(outcome) {
                if let Err(e) = r {
                    results[*i] = Err(e.into());
                }
            }
            return aborted(results);
        }
        for (i, r) in table_pos.iter().zip(outcome) {
            if let Err(e) = r {
                results[*i] = Err(e.into());
            }
        }
    }
    for (i, op) in rest {
        if results[i].is_err() {
            continue;
        }
        let r: P4Result<()> = match &op {
            Op::Table(TableOp::Default { table_id, action, cookies }) => {
                control.set_default_entry(*table_id, action.clone(), cookies.clone()).map_err(Into::into)
            }
            Op::Register { id, index, value } => match index {
                Some(ix) => control.write_register(*id, *ix, *value).map_err(Into::into),
                None => control
                    .register_size(*id)
                    .and_then(|n| {
                        (0..n).try_for_each(|ix| {
                            // Writing rng_seed reseeds even with the value it holds.
                            if *value == 0 && *id != REG_RNG_SEED && control.read_register(*id, ix)? == 0 {
                                return Ok(()); // see WHY_SKIP_ZEROS
                            }
                            control.write_register(*id, ix, *value)
                        })
                    })
                    .map_err(Into::into),
            },
            Op::Counter { id, index, data: Some((bytes, packets)) } => match index {
                Some(ix) => control.write_counter(*id, *ix, *bytes, *packets).map_err(Into::into),
                None => control
                    .counter_size(*id)
                    .and_then(|n| {
                        (0..n).try_for_each(|ix| {
                            if (*bytes, *packets) == (0, 0) && control.read_counter(*id, ix)? == (0, 0) {
                                return Ok(()); // see WHY_SKIP_ZEROS
                            }
                            control.write_counter(*id, ix, *bytes, *packets)
                        })
                    })
                    .map_err(Into::into),
            },
            Op::Digest { kind, id, config } => digests.apply_config(*kind, *id, *config),
            _ => Ok(()),
        };
        results[i] = r;
    }
    results
}

/// Whether every decoded op can be part of one data-plane-atomic snapshot.
pub fn dataplane_atomic_capable(ops: &[P4Result<Op>]) -> bool {
    ops.iter().all(|o| matches!(o, Ok(Op::Table(TableOp::Entry { .. })) | Err(_)))
}
