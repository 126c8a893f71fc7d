//! TableEntry messages <-> the store's table entries: the P4Runtime rules that are about a table
//! entry as a whole (priority, default entry, const, unsupported features) live here; byte-level
//! and per-field rules are in `codec.rs`.

#![allow(deprecated)] // TableEntry.controller_metadata is deprecated in favour of `metadata`, but clients still use it.

use crate::contract::{self, ActionScope, MatchKind, TableDef};
use crate::state::{ActionCall, DefaultCookies, FieldMatch, TableEntry, UpdateKind};

use super::codec::{decode_action, decode_matches, encode_action, encode_matches};
use super::error::{P4Error, P4Result};
use super::proto::p4::v1 as pb;

/// One table update, decoded and validated against the contract.
#[derive(Clone, Debug, PartialEq)]
pub enum TableOp {
    /// Insert, modify or delete a match entry. For a MODIFY whose action was left unset the
    /// action is `None` (the spec: keep the entry's action); DELETE carries no action either.
    Entry { kind: UpdateKind, entry: TableEntry, action_given: bool },
    /// MODIFY of the default entry; `None` resets it to the P4 program's default (and its cookies
    /// to none, spec "Default Entry").
    Default { table_id: u32, action: Option<ActionCall>, cookies: DefaultCookies },
}

pub fn lookup_table(table_id: u32) -> P4Result<&'static TableDef> {
    if table_id == 0 {
        return Err(P4Error::invalid("table_id 0 is not a table (wildcards are for reads only)"));
    }
    contract::table(table_id).ok_or_else(|| P4Error::not_found_or_invalid_table(table_id))
}

impl P4Error {
    fn not_found_or_invalid_table(table_id: u32) -> P4Error {
        P4Error::invalid(format!("unknown table id {table_id} (0x{table_id:08x})"))
    }
}

fn action_name(id: u32) -> &'static str {
    contract::action(id).map_or("?", |a| a.name)
}

/// Tables whose key has a ternary or range field order entries by priority, so entries need one.
pub fn needs_priority(table: &TableDef) -> bool {
    table.keys.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range))
}

/// Reject the TableEntry features this target does not have (direct resources, idle timeout,
/// const entries). A DELETE is only checked for `is_const` (which the
/// spec requires to be false in every write): it considers the key alone, and "all other fields
/// must be ignored, even if they have nonsensical values" (spec, "TableEntry").
fn check_unsupported(table: &TableDef, te: &pb::TableEntry, kind: UpdateKind) -> P4Result<()> {
    let t = table.name;
    if te.is_const {
        return Err(P4Error::invalid(format!("table {t}: is_const must be false in a write")));
    }
    if kind == UpdateKind::Delete {
        return Ok(());
    }
    if te.idle_timeout_ns != 0 || te.time_since_last_hit.is_some() {
        return Err(P4Error::invalid(format!("table {t} does not support idle timeout")));
    }
    if te.counter_data.is_some() {
        return Err(P4Error::invalid(format!("table {t} has no direct counter (counter_data must be unset)")));
    }
    if te.meter_config.is_some() || te.meter_counter_data.is_some() {
        return Err(P4Error::invalid(format!("table {t} has no direct meter (meter fields must be unset)")));
    }
    Ok(())
}

fn decode_table_action(table: &TableDef, action: &pb::TableAction) -> P4Result<ActionCall> {
    match action.r#type.as_ref() {
        Some(pb::table_action::Type::Action(a)) => decode_action(table, a),
        Some(_) => Err(P4Error::invalid(format!(
            "table {} is a direct table: give an action, not an action profile member, group or action set",
            table.name
        ))),
        None => Err(P4Error::invalid(format!("table {}: action is empty", table.name))),
    }
}

/// Decode one TableEntry of a Write update.
pub fn decode_update(kind: UpdateKind, te: &pb::TableEntry) -> P4Result<TableOp> {
    let table = lookup_table(te.table_id)?;
    let t = table.name;
    check_unsupported(table, te, kind)?;

    if te.is_default_action {
        if kind != UpdateKind::Modify {
            return Err(P4Error::invalid(format!(
                "table {t}: the default entry always exists; it can only be modified (not inserted or deleted)"
            )));
        }
        if !te.r#match.is_empty() || te.priority != 0 {
            return Err(P4Error::invalid(format!(
                "table {t}: the default entry must have no match fields and priority 0"
            )));
        }
        if contract::default_is_const(table.id) {
            return Err(P4Error::permission_denied(format!("table {t}: the default action is const")));
        }
        let action = te.action.as_ref().map(|a| decode_table_action(table, a)).transpose()?;
        if let Some(a) = &action {
            if contract::action_scope(table.id, a.action_id) == ActionScope::TableOnly {
                return Err(P4Error::permission_denied(format!(
                    "table {t}: action {} may not be the default action (@tableonly)",
                    action_name(a.action_id)
                )));
            }
        }
        // "Apart from the above restrictions, the default entry is treated like a regular entry"
        // (spec, "Default Entry"): its cookies are kept and read back (PI keeps them too).
        let cookies = DefaultCookies { controller_metadata: te.controller_metadata, metadata: te.metadata.clone() };
        return Ok(TableOp::Default { table_id: table.id, action, cookies });
    }

    let matches = decode_matches(table, &te.r#match)?;
    if needs_priority(table) {
        if te.priority == 0 {
            return Err(P4Error::invalid(format!(
                "table {t} has ternary/range keys: entries need a non-zero priority"
            )));
        }
    } else if te.priority != 0 {
        return Err(P4Error::invalid(format!(
            "table {t} has no ternary/range keys: priority must be 0, got {}",
            te.priority
        )));
    }

    let (action, action_given) = match (kind, te.action.as_ref()) {
        // DELETE considers only the key; everything else is ignored, even nonsense.
        (UpdateKind::Delete, _) => (None, false),
        (UpdateKind::Insert, None) => {
            return Err(P4Error::invalid(format!("table {t}: INSERT needs an action")));
        }
        (_, Some(a)) => {
            let call = decode_table_action(table, a)?;
            if contract::action_scope(table.id, call.action_id) == ActionScope::DefaultOnly {
                return Err(P4Error::permission_denied(format!(
                    "table {t}: action {} may only be the default action (@defaultonly)",
                    action_name(call.action_id)
                )));
            }
            (Some(call), true)
        }
        (UpdateKind::Modify, None) => (None, false),
    };
    Ok(TableOp::Entry {
        kind,
        entry: TableEntry {
            table_id: table.id,
            matches,
            priority: te.priority,
            action: action.unwrap_or(ActionCall { action_id: 0, params: Vec::new() }),
            controller_metadata: te.controller_metadata,
            metadata: te.metadata.clone(),
        },
        action_given,
    })
}

/// Canonical TableEntry for a stored entry.
pub fn encode_entry(e: &TableEntry) -> pb::TableEntry {
    let table = contract::table(e.table_id);
    pb::TableEntry {
        table_id: e.table_id,
        r#match: table.map(|t| encode_matches(t, &e.matches)).unwrap_or_default(),
        action: Some(pb::TableAction { r#type: Some(pb::table_action::Type::Action(encode_action(&e.action))) }),
        priority: e.priority,
        controller_metadata: e.controller_metadata,
        metadata: e.metadata.clone(),
        ..Default::default()
    }
}

/// The default entry of a table, as read back.
pub fn encode_default(table_id: u32, action: &ActionCall, cookies: &DefaultCookies) -> pb::TableEntry {
    pb::TableEntry {
        table_id,
        action: Some(pb::TableAction { r#type: Some(pb::table_action::Type::Action(encode_action(action))) }),
        is_default_action: true,
        controller_metadata: cookies.controller_metadata,
        metadata: cookies.metadata.clone(),
        ..Default::default()
    }
}

/// A table-entry read request, decoded (P4Runtime "Wildcard Reads").
#[derive(Clone, Debug, PartialEq)]
pub struct TableQuery {
    /// 0 = every table.
    pub table_id: u32,
    /// Read the default entry instead of the match entries.
    pub default_entry: bool,
    /// Match key filter (exact key equality); None = every entry.
    pub matches: Option<Vec<Option<FieldMatch>>>,
    pub action_id: Option<u32>,
    /// 0 = any.
    pub priority: i32,
    /// 0 = any.
    pub controller_metadata: u64,
    /// Empty = any.
    pub metadata: Vec<u8>,
}

pub fn decode_query(te: &pb::TableEntry) -> P4Result<TableQuery> {
    if te.counter_data.is_some() || te.meter_config.is_some() || te.meter_counter_data.is_some() {
        return Err(P4Error::invalid("this target has no direct counters or meters to read"));
    }
    if te.time_since_last_hit.is_some() {
        return Err(P4Error::invalid("this target has no idle timeout to read"));
    }
    if te.table_id == 0 {
        let filtered = !te.r#match.is_empty()
            || te.action.is_some()
            || te.priority != 0
            || te.controller_metadata != 0
            || !te.metadata.is_empty()
            || te.is_default_action;
        if filtered {
            return Err(P4Error::invalid("a read of all tables (table_id 0) cannot use other filters"));
        }
        return Ok(TableQuery {
            table_id: 0,
            default_entry: false,
            matches: None,
            action_id: None,
            priority: 0,
            controller_metadata: 0,
            metadata: Vec::new(),
        });
    }
    let table = lookup_table(te.table_id)?;
    // Spec, "Default Entry": with is_default_action set, match must be empty and priority 0.
    if te.is_default_action && (!te.r#match.is_empty() || te.priority != 0) {
        return Err(P4Error::invalid(format!(
            "table {}: a read of the default entry must have no match fields and priority 0",
            table.name
        )));
    }
    let matches = if te.r#match.is_empty() { None } else { Some(decode_matches(table, &te.r#match)?) };
    let action_id = match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        None => None,
        Some(pb::table_action::Type::Action(a)) => Some(a.action_id),
        Some(_) => return Err(P4Error::invalid("reads can filter by action id only")),
    };
    Ok(TableQuery {
        table_id: table.id,
        default_entry: te.is_default_action,
        matches,
        action_id,
        priority: te.priority,
        controller_metadata: te.controller_metadata,
        metadata: te.metadata.clone(),
    })
}

impl TableQuery {
    pub fn accepts(&self, e: &TableEntry) -> bool {
        self.matches.as_ref().is_none_or(|m| *m == e.matches)
            && self.action_id.is_none_or(|a| a == e.action.action_id)
            && (self.priority == 0 || self.priority == e.priority)
            && (self.controller_metadata == 0 || self.controller_metadata == e.controller_metadata)
            && (self.metadata.is_empty() || self.metadata == e.metadata)
    }

    /// Whether the default entry (whose action is `action`) passes the filters.
    pub fn accepts_default(&self, action: &ActionCall, cookies: &DefaultCookies) -> bool {
        self.action_id.is_none_or(|a| a == action.action_id)
            && (self.controller_metadata == 0 || self.controller_metadata == cookies.controller_metadata)
            && (self.metadata.is_empty() || self.metadata == cookies.metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::TABLES;
    use crate::p4rt::codec::encode_uint;
    use tonic::Code;

    fn ternary_table() -> &'static TableDef {
        TABLES.iter().find(|t| needs_priority(t)).expect("the contract has a ternary table")
    }
    fn exact_table() -> &'static TableDef {
        TABLES.iter().find(|t| t.keys.iter().all(|k| matches!(k.kind, MatchKind::Exact))).expect("exact table")
    }
    fn action_of(t: &TableDef) -> pb::TableAction {
        let a = contract::action(t.action_ids[0]).unwrap();
        pb::TableAction {
            r#type: Some(pb::table_action::Type::Action(pb::Action {
                action_id: a.id,
                params: a.params.iter().map(|p| pb::action::Param { param_id: p.id, value: vec![1] }).collect(),
            })),
        }
    }
    fn exact_matches(t: &TableDef) -> Vec<pb::FieldMatch> {
        t.keys
            .iter()
            .map(|k| pb::FieldMatch {
                field_id: k.id,
                field_match_type: Some(pb::field_match::FieldMatchType::Exact(pb::field_match::Exact {
                    value: encode_uint(1),
                })),
            })
            .collect()
    }

    #[test]
    fn ternary_table_needs_priority() {
        let t = ternary_table();
        let te = pb::TableEntry { table_id: t.id, action: Some(action_of(t)), ..Default::default() };
        let e = decode_update(UpdateKind::Insert, &te).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("priority"), "{}", e.message);
        let te = pb::TableEntry { priority: 10, ..te };
        let op = decode_update(UpdateKind::Insert, &te).unwrap();
        let TableOp::Entry { entry, .. } = op else { panic!() };
        assert!(entry.matches.iter().all(|m| m.is_none()));
        // Read-write symmetry: what we encode is what was written.
        assert_eq!(encode_entry(&entry), te);
    }

    #[test]
    fn exact_table_rejects_priority_and_round_trips() {
        let t = exact_table();
        let te = pb::TableEntry {
            table_id: t.id,
            r#match: exact_matches(t),
            action: Some(action_of(t)),
            controller_metadata: 7,
            metadata: b"opaque".to_vec(),
            ..Default::default()
        };
        let TableOp::Entry { entry, .. } = decode_update(UpdateKind::Insert, &te).unwrap() else { panic!() };
        assert_eq!(encode_entry(&entry), te);
        let bad = pb::TableEntry { priority: 1, ..te };
        assert_eq!(decode_update(UpdateKind::Insert, &bad).unwrap_err().code, Code::InvalidArgument);
    }

    #[test]
    fn default_entry_rules() {
        let t = exact_table();
        let te = pb::TableEntry {
            table_id: t.id,
            is_default_action: true,
            action: Some(action_of(t)),
            ..Default::default()
        };
        assert!(matches!(decode_update(UpdateKind::Modify, &te), Ok(TableOp::Default { action: Some(_), .. })));
        // The default entry keeps its cookies like any entry (spec, "Default Entry").
        let cookie = pb::TableEntry { controller_metadata: 9, metadata: b"m".to_vec(), ..te.clone() };
        let Ok(TableOp::Default { cookies, .. }) = decode_update(UpdateKind::Modify, &cookie) else { panic!() };
        assert_eq!(cookies, DefaultCookies { controller_metadata: 9, metadata: b"m".to_vec() });
        assert_eq!(decode_update(UpdateKind::Insert, &te).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(decode_update(UpdateKind::Delete, &te).unwrap_err().code, Code::InvalidArgument);
        let reset = pb::TableEntry { action: None, ..te.clone() };
        assert_eq!(
            decode_update(UpdateKind::Modify, &reset),
            Ok(TableOp::Default { table_id: t.id, action: None, cookies: DefaultCookies::default() })
        );
        let with_match = pb::TableEntry { r#match: exact_matches(t), ..te };
        assert_eq!(decode_update(UpdateKind::Modify, &with_match).unwrap_err().code, Code::InvalidArgument);
    }

    #[test]
    fn unknown_ids_and_unsupported_features() {
        let e = decode_update(UpdateKind::Insert, &pb::TableEntry { table_id: 0x0200_0fff, ..Default::default() })
            .unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("unknown table id"), "{}", e.message);
        let t = exact_table();
        let base = pb::TableEntry {
            table_id: t.id,
            r#match: exact_matches(t),
            action: Some(action_of(t)),
            ..Default::default()
        };
        for te in [
            pb::TableEntry { is_const: true, ..base.clone() },
            pb::TableEntry { idle_timeout_ns: 5, ..base.clone() },
            pb::TableEntry { counter_data: Some(pb::CounterData::default()), ..base.clone() },
        ] {
            assert_eq!(decode_update(UpdateKind::Insert, &te).unwrap_err().code, Code::InvalidArgument);
        }
        let mut unknown_action = base.clone();
        unknown_action.action = Some(pb::TableAction {
            r#type: Some(pb::table_action::Type::Action(pb::Action { action_id: 0x0100_0fff, params: vec![] })),
        });
        let e = decode_update(UpdateKind::Insert, &unknown_action).unwrap_err();
        assert!(e.message.contains("unknown action id"), "{}", e.message);
        // DELETE ignores the action entirely.
        assert!(decode_update(UpdateKind::Delete, &unknown_action).is_ok());
        // ... and every other non-key field, even ones this target does not support; only
        // is_const must still be false (spec, "TableEntry").
        for te in [
            pb::TableEntry { idle_timeout_ns: 5, ..base.clone() },
            pb::TableEntry { time_since_last_hit: Some(Default::default()), ..base.clone() },
            pb::TableEntry { counter_data: Some(pb::CounterData::default()), ..base.clone() },
            pb::TableEntry { meter_config: Some(Default::default()), ..base.clone() },
            pb::TableEntry { metadata: b"cookie".to_vec(), ..base.clone() },
        ] {
            assert!(matches!(decode_update(UpdateKind::Delete, &te), Ok(TableOp::Entry { .. })), "{te:?}");
        }
        let e = decode_update(UpdateKind::Delete, &pb::TableEntry { is_const: true, ..base.clone() }).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        // MODIFY may leave the action unset.
        let keep = pb::TableEntry { action: None, ..base };
        assert!(matches!(decode_update(UpdateKind::Modify, &keep), Ok(TableOp::Entry { action_given: false, .. })));
        assert_eq!(decode_update(UpdateKind::Insert, &keep).unwrap_err().code, Code::InvalidArgument);
    }

    #[test]
    fn scopes_and_const_defaults_are_permission_denied() {
        for &(table_id, action_id) in contract::DEFAULT_ONLY_ACTIONS {
            let t = contract::table(table_id).unwrap();
            let a = contract::action(action_id).unwrap();
            let action = pb::TableAction {
                r#type: Some(pb::table_action::Type::Action(pb::Action {
                    action_id,
                    params: a.params.iter().map(|p| pb::action::Param { param_id: p.id, value: vec![0] }).collect(),
                })),
            };
            let te = pb::TableEntry {
                table_id,
                r#match: exact_matches(t),
                action: Some(action.clone()),
                ..Default::default()
            };
            let e = decode_update(UpdateKind::Insert, &te).unwrap_err();
            assert_eq!(e.code, Code::PermissionDenied, "{}", e.message);
            if !contract::default_is_const(table_id) {
                let d =
                    pb::TableEntry { table_id, is_default_action: true, action: Some(action), ..Default::default() };
                assert!(decode_update(UpdateKind::Modify, &d).is_ok());
            }
        }
        for &table_id in contract::CONST_DEFAULT_TABLES {
            let d = pb::TableEntry { table_id, is_default_action: true, ..Default::default() };
            assert_eq!(decode_update(UpdateKind::Modify, &d).unwrap_err().code, Code::PermissionDenied);
        }
    }

    #[test]
    fn wildcard_queries() {
        let q = decode_query(&pb::TableEntry::default()).unwrap();
        assert_eq!(q.table_id, 0);
        assert!(decode_query(&pb::TableEntry { priority: 3, ..Default::default() }).is_err());
        let t = exact_table();
        let q =
            decode_query(&pb::TableEntry { table_id: t.id, is_default_action: true, ..Default::default() }).unwrap();
        assert!(q.default_entry);
        let q =
            decode_query(&pb::TableEntry { table_id: t.id, r#match: exact_matches(t), ..Default::default() }).unwrap();
        let TableOp::Entry { entry, .. } = decode_update(
            UpdateKind::Insert,
            &pb::TableEntry {
                table_id: t.id,
                r#match: exact_matches(t),
                action: Some(action_of(t)),
                ..Default::default()
            },
        )
        .unwrap() else {
            panic!()
        };
        assert!(q.accepts(&entry));
        let other = TableEntry { matches: vec![Some(FieldMatch::Exact(2)); t.keys.len()], ..entry.clone() };
        assert!(!q.accepts(&other));
        // A metadata filter selects only the entries carrying that metadata.
        let q =
            decode_query(&pb::TableEntry { table_id: t.id, metadata: b"x".to_vec(), ..Default::default() }).unwrap();
        assert!(!q.accepts(&entry) && !q.accepts_default(&entry.action, &DefaultCookies::default()));
        // The default entry is read with no match and priority 0 (spec, "Default Entry").
        for te in [
            pb::TableEntry { table_id: t.id, is_default_action: true, r#match: exact_matches(t), ..Default::default() },
            pb::TableEntry { table_id: t.id, is_default_action: true, priority: 1, ..Default::default() },
        ] {
            assert_eq!(decode_query(&te).unwrap_err().code, Code::InvalidArgument);
        }
        let q =
            decode_query(&pb::TableEntry { table_id: t.id, is_default_action: true, ..Default::default() }).unwrap();
        assert!(q.accepts_default(&entry.action, &DefaultCookies::default()));
        let q = decode_query(&pb::TableEntry {
            table_id: t.id,
            is_default_action: true,
            controller_metadata: 9,
            ..Default::default()
        })
        .unwrap();
        assert!(!q.accepts_default(&entry.action, &DefaultCookies::default()));
    }
}
