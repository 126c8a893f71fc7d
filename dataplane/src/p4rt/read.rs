//! The Read RPC: each requested entity is a filter; ids of 0 and unset indices are wildcards
//! (P4Runtime spec, "Wildcard Reads"). Values come back canonical, so what a client wrote
//! canonically reads back identical (read-write symmetry).

use crate::contract;
use crate::state::SwitchControl;

use super::codec::encode_uint;
use super::digest::DigestConfig;
use super::entries::{decode_query, encode_default, encode_entry, lookup_table};
use super::error::{P4Error, P4Result};
use super::proto::p4::v1 as pb;
use super::write::check_index;

/// Where a read puts the entities it finds (a Vec, or a sink that streams them out in chunks:
/// a wildcard read of a per-UE array yields millions).
pub trait Sink {
    fn push(&mut self, e: pb::Entity);
}

impl Sink for Vec<pb::Entity> {
    fn push(&mut self, e: pb::Entity) {
        Vec::push(self, e)
    }
}

fn entity(e: pb::entity::Entity) -> pb::Entity {
    pb::Entity { entity: Some(e) }
}

fn indices(index: Option<u32>, size: u32) -> impl Iterator<Item = u32> {
    let (lo, hi) = match index {
        Some(i) => (i, i + 1),
        None => (0, size),
    };
    lo..hi
}

/// A DirectCounterEntry / DirectMeterEntry read. p4runtime.proto gives its scope: "All counter
/// [meter] cells for all tables if table_entry.table_id = 0", "All ... cells of a table if
/// table_entry.table_id is present and table_entry.match is empty" (the spec's "Wildcard Reads":
/// default values are wildcards). No table of this pipeline has a direct counter or meter, so the
/// read of all tables finds none (as a wildcard read of the meters does); a read that names a table
/// is refused, since that table has none; `table_entry` is required ("This field is required"; PI
/// refuses it missing too), and with table_id 0 no other filter may be given (as for table entries).
fn read_direct(te: Option<&pb::TableEntry>, what: &str) -> P4Result<()> {
    let Some(te) = te else {
        return Err(P4Error::invalid(format!(
            "direct_{what}_entry: table_entry is required (table_entry {{}}: table_id 0 reads all tables)"
        )));
    };
    let q = decode_query(te).map_err(|e| e.context(format!("direct_{what}_entry.table_entry")))?;
    if q.table_id == 0 {
        return Ok(()); // all tables: none has a direct {what}
    }
    Err(P4Error::invalid(format!(
        "table {} has no direct {what} (this target has none)",
        lookup_table(q.table_id)?.name
    )))
}

/// Append the entities matching `req` to `out`.
pub fn read_entity(
    control: &SwitchControl,
    digests: &[(u32, DigestConfig)],
    req: &pb::Entity,
    out: &mut impl Sink,
) -> P4Result<()> {
    use pb::entity::Entity as E;
    let Some(req) = req.entity.as_ref() else {
        return Err(P4Error::invalid("entity is empty: set one entity type (wildcard reads go per type)"));
    };
    match req {
        E::TableEntry(te) => {
            let q = decode_query(te)?;
            if q.default_entry {
                let action = control.default_action(q.table_id)?;
                let cookies = control.default_cookies(q.table_id)?;
                if q.accepts_default(&action, &cookies) {
                    out.push(entity(E::TableEntry(encode_default(q.table_id, &action, &cookies))));
                }
            } else {
                for e in control.read_table(q.table_id)? {
                    if q.accepts(&e) {
                        out.push(entity(E::TableEntry(encode_entry(&e))));
                    }
                }
            }
        }
        E::CounterEntry(c) => {
            let defs: Vec<&contract::CounterDef> = if c.counter_id == 0 {
                if c.index.is_some() {
                    return Err(P4Error::invalid("a read of all counters (counter_id 0) cannot select an index"));
                }
                contract::COUNTERS.iter().collect()
            } else {
                vec![contract::counter(c.counter_id).ok_or_else(|| {
                    P4Error::invalid(format!("unknown counter id {} (0x{:08x})", c.counter_id, c.counter_id))
                })?]
            };
            for def in defs {
                let size = control.counter_size(def.id)?;
                let index = check_index(&c.index, size, &format!("counter {}", def.name))?;
                for i in indices(index, size) {
                    let (bytes, packets) = control.read_counter(def.id, i)?;
                    out.push(entity(E::CounterEntry(pb::CounterEntry {
                        counter_id: def.id,
                        index: Some(pb::Index { index: i as i64 }),
                        data: Some(pb::CounterData { byte_count: bytes as i64, packet_count: packets as i64 }),
                    })));
                }
            }
        }
        E::RegisterEntry(r) => {
            let defs: Vec<&contract::RegisterDef> = if r.register_id == 0 {
                if r.index.is_some() {
                    return Err(P4Error::invalid("a read of all registers (register_id 0) cannot select an index"));
                }
                contract::REGISTERS.iter().collect()
            } else {
                vec![contract::register(r.register_id).ok_or_else(|| {
                    P4Error::invalid(format!("unknown register id {} (0x{:08x})", r.register_id, r.register_id))
                })?]
            };
            for def in defs {
                let size = control.register_size(def.id)?;
                let index = check_index(&r.index, size, &format!("register {}", def.name))?;
                for i in indices(index, size) {
                    let v = control.read_register(def.id, i)?;
                    out.push(entity(E::RegisterEntry(pb::RegisterEntry {
                        register_id: def.id,
                        index: Some(pb::Index { index: i as i64 }),
                        data: Some(pb::P4Data { data: Some(pb::p4_data::Data::Bitstring(encode_uint(v))) }),
                    })));
                }
            }
        }
        E::DigestEntry(d) => {
            if d.digest_id != 0 && contract::digest(d.digest_id).is_none() {
                return Err(P4Error::invalid(format!("unknown digest id {} (0x{:08x})", d.digest_id, d.digest_id)));
            }
            for &(id, cfg) in digests {
                if d.digest_id == 0 || d.digest_id == id {
                    out.push(entity(E::DigestEntry(pb::DigestEntry {
                        digest_id: id,
                        config: Some(pb::digest_entry::Config {
                            max_timeout_ns: cfg.max_timeout_ns,
                            max_list_size: cfg.max_list_size,
                            ack_timeout_ns: cfg.ack_timeout_ns,
                        }),
                    })));
                }
            }
        }
        // Object kinds this pipeline has none of: a wildcard finds nothing, an id is unknown.
        E::MeterEntry(m) if m.meter_id != 0 => {
            return Err(P4Error::invalid(format!("unknown meter id {} (this target has no meters)", m.meter_id)))
        }
        E::ValueSetEntry(v) if v.value_set_id != 0 => {
            return Err(P4Error::invalid(format!(
                "unknown value set id {} (this target has no value sets)",
                v.value_set_id
            )))
        }
        E::ExternEntry(x) if x.extern_type_id != 0 => {
            return Err(P4Error::invalid(format!(
                "unknown extern type {} (this target has no externs)",
                x.extern_type_id
            )))
        }
        E::ActionProfileMember(m) if m.action_profile_id != 0 => {
            return Err(P4Error::invalid(format!("unknown action profile id {}", m.action_profile_id)))
        }
        E::ActionProfileGroup(g) if g.action_profile_id != 0 => {
            return Err(P4Error::invalid(format!("unknown action profile id {}", g.action_profile_id)))
        }
        E::MeterEntry(_)
        | E::ValueSetEntry(_)
        | E::ExternEntry(_)
        | E::ActionProfileMember(_)
        | E::ActionProfileGroup(_) => {}
        E::DirectCounterEntry(d) => read_direct(d.table_entry.as_ref(), "counter")?,
        E::DirectMeterEntry(d) => {
            if d.counter_data.is_some() {
                // Spec, "MeterCounterData": a target without per-color counters answers UNIMPLEMENTED.
                return Err(P4Error::unimplemented("this target has no per-color meter counters (counter_data)"));
            }
            read_direct(d.table_entry.as_ref(), "meter")?
        }
        // This target duplicates natively (no clone session) and has no multicast: there are no
        // replication entries, so a read finds none. Answering instead of failing lets clients
        // that read every entity (finsy's delete_all, p4runtime-shell) work.
        E::PacketReplicationEngineEntry(pre) => {
            if pre.r#type.is_none() {
                return Err(P4Error::invalid(
                    "packet_replication_engine_entry: set multicast_group_entry or clone_session_entry",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::TABLES;
    use crate::state::ControlConfig;
    use tonic::Code;

    fn read(control: &SwitchControl, e: pb::entity::Entity) -> P4Result<Vec<pb::Entity>> {
        let mut out = Vec::new();
        read_entity(control, &[], &entity(e), &mut out).map(|()| out)
    }

    fn direct_counter(te: Option<pb::TableEntry>) -> pb::entity::Entity {
        pb::entity::Entity::DirectCounterEntry(pb::DirectCounterEntry { table_entry: te, data: None })
    }

    fn direct_meter(te: Option<pb::TableEntry>, counters: bool) -> pb::entity::Entity {
        pb::entity::Entity::DirectMeterEntry(pb::DirectMeterEntry {
            table_entry: te,
            config: None,
            counter_data: counters.then(pb::MeterCounterData::default),
        })
    }

    #[test]
    fn a_wildcard_read_of_direct_counters_and_meters_over_all_tables_finds_none() {
        // p4runtime.proto: "All counter cells for all tables if table_entry.table_id = 0"; this
        // pipeline has no direct counter or meter, so the answer is empty, as for a wildcard meter read.
        let (control, _link) = SwitchControl::new(ControlConfig::default()).unwrap();
        let all = Some(pb::TableEntry::default());
        assert!(read(&control, direct_counter(all.clone())).unwrap().is_empty());
        assert!(read(&control, direct_meter(all.clone(), false)).unwrap().is_empty());
        assert!(read(&control, pb::entity::Entity::MeterEntry(pb::MeterEntry::default())).unwrap().is_empty());
        // A read naming a table is refused: that table has none.
        let table = &TABLES[0];
        let named = Some(pb::TableEntry { table_id: table.id, ..Default::default() });
        for e in [direct_counter(named.clone()), direct_meter(named, false)] {
            let err = read(&control, e).unwrap_err();
            assert_eq!(err.code, Code::InvalidArgument);
            assert!(err.message.contains(&format!("table {} has no direct", table.name)), "{}", err.message);
        }
        // table_entry is required; table_id 0 takes no other filter; per-color counters are UNIMPLEMENTED.
        let err = read(&control, direct_counter(None)).unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert!(err.message.contains("table_entry is required"), "{}", err.message);
        let filtered = Some(pb::TableEntry { priority: 5, ..Default::default() });
        assert_eq!(read(&control, direct_counter(filtered)).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(read(&control, direct_meter(all, true)).unwrap_err().code, Code::Unimplemented);
    }
}
