//! P4Runtime decoding (p4rt/codec.rs, entries.rs, write.rs): byte strings decode to the value
//! they encode whatever their leading zeros and are refused when too wide; every valid table
//! entry of every table survives encode -> decode unchanged (read-write symmetry); and any bytes
//! at all, or any mutation of a valid WriteRequest, decode to a value or an error, never a panic.
use proptest::prelude::*;
use prost::Message;
use tonic::Code;

use crate::contract::{self, ActionScope, MatchKind, TableDef, TABLES};
use crate::p4rt::codec::{decode_uint, encode_uint, max_value};
use crate::p4rt::entries::{decode_update, encode_entry, needs_priority, TableOp};
use crate::p4rt::proto::p4::v1 as pb;
use crate::p4rt::write::decode_op;
use crate::state::{ActionCall, Capacities, ControlConfig, FieldMatch, SwitchControl, TableEntry, UpdateKind};

fn value(bits: u32) -> impl Strategy<Value = u128> {
    // Edges (0, 1, the maximum) as often as the rest: that is where widths go wrong.
    let max = max_value(bits);
    prop_oneof![Just(0u128), Just(1u128 & max), Just(max), any::<u128>().prop_map(move |v| v & max)]
}

fn field(kind: MatchKind, bits: u32) -> BoxedStrategy<FieldMatch> {
    let max = max_value(bits);
    match kind {
        MatchKind::Exact => value(bits).prop_map(FieldMatch::Exact).boxed(),
        MatchKind::Ternary => (value(bits), value(bits).prop_filter("mask 0 is don't care", |m| *m != 0))
            .prop_map(|(v, mask)| FieldMatch::Ternary { value: v & mask, mask })
            .boxed(),
        MatchKind::Lpm => (value(bits), 1..=bits)
            .prop_map(move |(v, plen)| FieldMatch::Lpm { value: v & !max_value(bits - plen) & max, prefix_len: plen })
            .boxed(),
        MatchKind::Range => (value(bits), value(bits))
            .prop_map(|(a, b)| FieldMatch::Range { lo: a.min(b), hi: a.max(b) })
            .prop_filter("the full range is don't care", move |r| *r != FieldMatch::Range { lo: 0, hi: max })
            .boxed(),
    }
}

fn action_for(table: &'static TableDef) -> BoxedStrategy<ActionCall> {
    let ids: Vec<u32> = table
        .action_ids
        .iter()
        .copied()
        .filter(|&a| contract::action_scope(table.id, a) != ActionScope::DefaultOnly)
        .collect();
    prop::sample::select(ids)
        .prop_flat_map(|id| {
            let def = contract::action(id).expect("the table's actions are in the contract");
            let params: Vec<BoxedStrategy<u128>> = def.params.iter().map(|p| value(p.bits).boxed()).collect();
            params.prop_map(move |params| ActionCall { action_id: id, params })
        })
        .boxed()
}

/// A valid entry of any table: every exact key set, other keys set or don't care, a priority
/// where the table needs one, an action the table allows with every parameter in range.
fn table_entry() -> impl Strategy<Value = TableEntry> {
    prop::sample::select(TABLES.iter().collect::<Vec<_>>()).prop_flat_map(|table: &'static TableDef| {
        let matches: Vec<BoxedStrategy<Option<FieldMatch>>> = table
            .keys
            .iter()
            .map(|k| match k.kind {
                MatchKind::Exact => field(k.kind, k.bits).prop_map(Some).boxed(),
                _ => prop::option::of(field(k.kind, k.bits)).boxed(),
            })
            .collect();
        let priority = if needs_priority(table) { (1..=i32::MAX).boxed() } else { Just(0).boxed() };
        let metadata = prop::collection::vec(any::<u8>(), 0..4);
        (matches, priority, action_for(table), any::<u64>(), metadata).prop_map(
            move |(matches, priority, action, meta, metadata)| TableEntry {
                table_id: table.id,
                matches,
                priority,
                action,
                controller_metadata: meta,
                metadata,
            },
        )
    })
}

thread_local! {
    /// One small switch state for every case (building one per case costs more than the decoding).
    static CONTROL: (SwitchControl, crate::state::DataPlaneLink) = SwitchControl::new(ControlConfig {
        caps: Capacities { classifier_entries: 16, profiles: 8, ue_ids: 64 },
        ports: vec![1, 2],
        ..ControlConfig::default()
    })
    .expect("a small switch state");
}

fn decode_all(req: &pb::WriteRequest) -> Vec<Result<(), crate::p4rt::error::P4Error>> {
    CONTROL.with(|(control, _)| req.updates.iter().map(|u| decode_op(control, u).map(|_| ())).collect())
}

proptest! {
    /// Canonical encoding decodes back; so does any number of leading zero bytes (the spec lets a
    /// client send them); a value one bit too wide is OUT_OF_RANGE, as is an empty string.
    #[test]
    fn byte_strings_round_trip(bits in 1u32..=128, v in any::<u128>(), zeros in 0usize..20) {
        let v = v & max_value(bits);
        let canonical = encode_uint(v);
        prop_assert!(!canonical.is_empty() && (canonical.len() == 1 || canonical[0] != 0));
        prop_assert_eq!(decode_uint(&canonical, bits, &"f").unwrap(), v);
        let mut padded = vec![0u8; zeros];
        padded.extend(&canonical);
        prop_assert_eq!(decode_uint(&padded, bits, &"f").unwrap(), v);
        if bits < 128 {
            let wide = encode_uint(v | 1u128 << bits);
            prop_assert_eq!(decode_uint(&wide, bits, &"f").unwrap_err().code, Code::OutOfRange);
        }
        prop_assert_eq!(decode_uint(&[], bits, &"f").unwrap_err().code, Code::OutOfRange);
    }

    /// Any valid entry of any table: encode_entry then decode_update (INSERT) gives the same entry.
    #[test]
    fn table_entries_round_trip(entry in table_entry()) {
        let wire = encode_entry(&entry);
        let back = decode_update(UpdateKind::Insert, &wire);
        prop_assert_eq!(back, Ok(TableOp::Entry { kind: UpdateKind::Insert, entry: entry.clone(), action_given: true }));
        // And through protobuf bytes, as a client sends it.
        let decoded = pb::TableEntry::decode(wire.encode_to_vec().as_slice()).unwrap();
        prop_assert_eq!(decoded, wire);
    }

    /// One field of a valid entry made too wide: refused with OUT_OF_RANGE (never stored truncated).
    #[test]
    fn too_wide_values_are_out_of_range(entry in table_entry(), which in any::<prop::sample::Index>()) {
        let mut wire = encode_entry(&entry);
        let table = contract::table(entry.table_id).unwrap();
        let Some(pb::table_action::Type::Action(action)) = wire.action.as_mut().and_then(|a| a.r#type.as_mut()) else {
            unreachable!()
        };
        let def = contract::action(action.action_id).unwrap();
        if def.params.is_empty() || def.params.iter().all(|p| p.bits >= 128) {
            return Ok(());
        }
        let i = which.index(def.params.len());
        let bits = def.params[i].bits;
        if bits >= 128 {
            return Ok(());
        }
        let pos = action.params.iter().position(|p| p.param_id == def.params[i].id).unwrap();
        action.params[pos].value = encode_uint(1u128 << bits);
        let err = decode_update(UpdateKind::Insert, &wire).unwrap_err();
        prop_assert_eq!(err.code, Code::OutOfRange, "{} {}", table.name, err.message);
    }

    /// Any bytes as a WriteRequest: protobuf refuses them or every update decodes to an op or an
    /// error; nothing panics.
    #[test]
    fn any_bytes_decode_or_fail(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(req) = pb::WriteRequest::decode(bytes.as_slice()) {
            let _ = decode_all(&req);
        }
    }

    /// Mutations of a valid WriteRequest (bit flips, edge bytes, truncation): the same.
    #[test]
    fn mutated_writes_decode_or_fail(
        entries in prop::collection::vec(table_entry(), 1..4),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let updates = entries.iter().map(|e| pb::Update {
            r#type: pb::update::Type::Insert as i32,
            entity: Some(pb::Entity { entity: Some(pb::entity::Entity::TableEntry(encode_entry(e))) }),
        }).collect();
        let mut bytes = pb::WriteRequest { device_id: 1, updates, ..Default::default() }.encode_to_vec();
        for (i, x) in flips {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        if let Ok(req) = pb::WriteRequest::decode(bytes.as_slice()) {
            for e in decode_all(&req).into_iter().filter_map(Result::err) {
                prop_assert!(matches!(e.code, Code::InvalidArgument | Code::OutOfRange | Code::NotFound
                    | Code::Unimplemented | Code::PermissionDenied), "{:?}", e);
            }
        }
    }
}
