//! The P4Info this target reports, built from the native contract (`crate::contract`) the way
//! `p4c-bm2-ss --p4runtime-files` writes it for the P4 program: fully qualified names, shortest
//! unique aliases, v1model package info, register and digest type specs, controller headers.
//!
//! Sizes are the runtime capacities (flags may make tables and arrays larger than the contract's
//! defaults); with default flags the result equals the checked-in `p4src/p4netem.p4info.txtpb`.

use crate::contract::{self, ActionScope, CounterUnit, MatchKind};
use crate::state::Capacities;

use super::codec::encode_uint;

/// p4c writes default-action arguments at the parameter's full width.
fn encode_full_width(value: u128, bits: u32) -> Vec<u8> {
    let n = bits.div_ceil(8).max(1) as usize;
    let b = encode_uint(value);
    let mut out = vec![0u8; n.saturating_sub(b.len())];
    out.extend_from_slice(&b);
    out
}
use super::proto::p4::config::v1 as cfg;

/// Shortest dot-separated suffix of each name that no other name in the list ends with (p4c's
/// default alias rule, applied over the names of every object kind at once).
fn aliases(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|name| {
            let parts: Vec<&str> = name.split('.').collect();
            for n in 1..=parts.len() {
                let suffix = parts[parts.len() - n..].join(".");
                let clash = names
                    .iter()
                    .any(|other| other != name && (*other == suffix || other.ends_with(&format!(".{suffix}"))));
                if !clash {
                    return suffix;
                }
            }
            name.to_string()
        })
        .collect()
}

fn preamble(id: u32, name: &str, alias: String, annotations: Vec<String>) -> Option<cfg::Preamble> {
    Some(cfg::Preamble { id, name: name.to_string(), alias, annotations, ..Default::default() })
}

fn bit_type(bits: u32) -> Option<cfg::P4DataTypeSpec> {
    Some(cfg::P4DataTypeSpec {
        type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Bitstring(cfg::P4BitstringLikeTypeSpec {
            type_spec: Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(cfg::P4BitTypeSpec {
                bitwidth: bits as i32,
            })),
            ..Default::default()
        })),
    })
}

fn match_type(kind: &MatchKind) -> cfg::match_field::MatchType {
    use cfg::match_field::MatchType as M;
    match kind {
        MatchKind::Exact => M::Exact,
        MatchKind::Ternary => M::Ternary,
        MatchKind::Range => M::Range,
        MatchKind::Lpm => M::Lpm,
    }
}

/// Every object's name, for alias computation.
fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    names.extend(contract::TABLES.iter().map(|t| t.name));
    names.extend(contract::ACTIONS.iter().map(|a| a.name));
    names.extend(contract::COUNTERS.iter().map(|c| c.name));
    names.extend(contract::REGISTERS.iter().map(|r| r.name));
    names.extend(contract::DIGESTS.iter().map(|d| d.name));
    names.extend(contract::CONTROLLER_HEADERS.iter().map(|h| h.name));
    names
}

/// Build the target's P4Info.
pub fn build(caps: &Capacities) -> cfg::P4Info {
    let names = all_names();
    let alias_list = aliases(&names);
    let alias = |name: &str| -> String {
        names.iter().position(|n| *n == name).map_or_else(|| name.to_string(), |i| alias_list[i].clone())
    };
    let tables = contract::TABLES
        .iter()
        .map(|t| {
            let alias = alias(t.name);
            let default_args = contract::action(t.default_action_id)
                .map(|a| {
                    a.params
                        .iter()
                        .zip(t.default_params)
                        .map(|(p, v)| cfg::table_action_call::Argument {
                            param_id: p.id,
                            value: encode_full_width(*v, p.bits),
                        })
                        .collect()
                })
                .unwrap_or_default();
            cfg::Table {
                preamble: preamble(t.id, t.name, alias, Vec::new()),
                match_fields: t
                    .keys
                    .iter()
                    .map(|k| cfg::MatchField {
                        id: k.id,
                        name: k.name.to_string(),
                        bitwidth: k.bits as i32,
                        r#match: Some(cfg::match_field::Match::MatchType(match_type(&k.kind) as i32)),
                        ..Default::default()
                    })
                    .collect(),
                action_refs: t
                    .action_ids
                    .iter()
                    .map(|&id| {
                        let (scope, annotations) = match contract::action_scope(t.id, id) {
                            ActionScope::TableAndDefault => (cfg::action_ref::Scope::TableAndDefault, vec![]),
                            ActionScope::TableOnly => {
                                (cfg::action_ref::Scope::TableOnly, vec!["@tableonly".to_string()])
                            }
                            ActionScope::DefaultOnly => {
                                (cfg::action_ref::Scope::DefaultOnly, vec!["@defaultonly".to_string()])
                            }
                        };
                        cfg::ActionRef { id, scope: scope as i32, annotations, ..Default::default() }
                    })
                    .collect(),
                const_default_action_id: if contract::default_is_const(t.id) { t.default_action_id } else { 0 },
                initial_default_action: Some(cfg::TableActionCall {
                    action_id: t.default_action_id,
                    arguments: default_args,
                }),
                size: caps.table_size(t.id).unwrap_or(t.size) as i64,
                ..Default::default()
            }
        })
        .collect();

    let actions = contract::ACTIONS
        .iter()
        .map(|a| cfg::Action {
            // core.p4 declares `@noWarn("unused") action NoAction()`; p4c copies the annotation.
            preamble: preamble(
                a.id,
                a.name,
                alias(a.name),
                if a.id == contract::ACTION_NO_ACTION { vec!["@noWarn(\"unused\")".to_string()] } else { Vec::new() },
            ),
            params: a
                .params
                .iter()
                .map(|p| cfg::action::Param {
                    id: p.id,
                    name: p.name.to_string(),
                    bitwidth: p.bits as i32,
                    ..Default::default()
                })
                .collect(),
        })
        .collect();

    let counters = contract::COUNTERS
        .iter()
        .map(|c| {
            use cfg::counter_spec::Unit;
            let unit = match c.unit {
                CounterUnit::Bytes => Unit::Bytes,
                CounterUnit::Packets => Unit::Packets,
                CounterUnit::Both => Unit::Both,
            };
            cfg::Counter {
                preamble: preamble(c.id, c.name, alias(c.name), c.annotations.iter().map(|a| a.to_string()).collect()),
                spec: Some(cfg::CounterSpec { unit: unit as i32 }),
                size: caps.counter_size(c.id).unwrap_or(c.size) as i64,
                ..Default::default()
            }
        })
        .collect();

    let registers = contract::REGISTERS
        .iter()
        .map(|r| cfg::Register {
            preamble: preamble(r.id, r.name, alias(r.name), Vec::new()),
            type_spec: bit_type(r.bits),
            size: caps.register_size(r.id).unwrap_or(r.size) as i32,
            ..Default::default()
        })
        .collect();

    // p4c names a digest after its struct type and describes the struct in type_info.
    let mut type_info = cfg::P4TypeInfo::default();
    let digests = contract::DIGESTS
        .iter()
        .map(|d| {
            type_info.structs.insert(
                d.name.to_string(),
                cfg::P4StructTypeSpec {
                    members: d
                        .fields
                        .iter()
                        .map(|(name, bits)| cfg::p4_struct_type_spec::Member {
                            name: name.to_string(),
                            type_spec: bit_type(*bits),
                        })
                        .collect(),
                    ..Default::default()
                },
            );
            cfg::Digest {
                preamble: preamble(d.id, d.name, alias(d.name), Vec::new()),
                type_spec: Some(cfg::P4DataTypeSpec {
                    type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Struct(cfg::P4NamedType {
                        name: d.name.to_string(),
                    })),
                }),
            }
        })
        .collect();

    let controller_packet_metadata = contract::CONTROLLER_HEADERS
        .iter()
        .map(|h| cfg::ControllerPacketMetadata {
            preamble: preamble(h.id, h.name, alias(h.name), vec![format!("@controller_header(\"{}\")", h.name)]),
            metadata: h
                .fields
                .iter()
                .map(|f| cfg::controller_packet_metadata::Metadata {
                    id: f.id,
                    name: f.name.to_string(),
                    bitwidth: f.bits as i32,
                    ..Default::default()
                })
                .collect(),
        })
        .collect();

    cfg::P4Info {
        pkg_info: Some(cfg::PkgInfo { arch: "v1model".to_string(), ..Default::default() }),
        tables,
        actions,
        counters,
        registers,
        digests,
        controller_packet_metadata,
        type_info: Some(type_info),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_shortest_unique_suffixes() {
        let a = aliases(&["P4netemIngress.drops", "P4netemEgress.profile_out", "NoAction", "a.x.t", "b.x.t", "c.t2"]);
        assert_eq!(a, vec!["drops", "profile_out", "NoAction", "a.x.t", "b.x.t", "t2"]);
    }

    #[test]
    fn p4info_matches_the_contract() {
        let info = build(&Capacities::default());
        assert_eq!(info.pkg_info.as_ref().unwrap().arch, "v1model");
        assert_eq!(info.tables.len(), contract::TABLES.len());
        for (t, def) in info.tables.iter().zip(contract::TABLES) {
            let p = t.preamble.as_ref().unwrap();
            assert_eq!((p.id, p.name.as_str()), (def.id, def.name));
            assert_eq!(p.alias, def.name.rsplit('.').next().unwrap());
            assert_eq!(t.size, def.size as i64);
            assert_eq!(t.match_fields.len(), def.keys.len());
            for (k, kd) in t.match_fields.iter().zip(def.keys) {
                assert_eq!((k.id, k.name.as_str(), k.bitwidth), (kd.id, kd.name, kd.bits as i32));
            }
            let refs: Vec<u32> = t.action_refs.iter().map(|r| r.id).collect();
            assert_eq!(refs, def.action_ids);
            let d = t.initial_default_action.as_ref().unwrap();
            assert_eq!(d.action_id, def.default_action_id);
            assert_eq!(d.arguments.len(), def.default_params.len());
        }
        for (r, def) in info.registers.iter().zip(contract::REGISTERS) {
            assert_eq!(r.size, def.size as i32);
            assert_eq!(super::super::compare::bit_width(&r.type_spec), Some(def.bits as i32));
        }
        let cpm: Vec<&str> =
            info.controller_packet_metadata.iter().map(|c| c.preamble.as_ref().unwrap().name.as_str()).collect();
        assert!(cpm.contains(&"packet_in") && cpm.contains(&"packet_out"));
        for d in &info.digests {
            let name = &d.preamble.as_ref().unwrap().name;
            assert!(info.type_info.as_ref().unwrap().structs.contains_key(name));
        }
        // Our own P4Info is, by definition, acceptable to the pipeline check.
        assert_eq!(super::super::compare::compare(&info, &info), Ok(()));
    }

    #[test]
    fn runtime_sizes_follow_the_capacities() {
        let caps = Capacities { classifier_entries: 100_000, profiles: 8192, ..Capacities::default() };
        let info = build(&caps);
        let size_of = |id: u32| info.tables.iter().find(|t| t.preamble.as_ref().unwrap().id == id).unwrap().size;
        assert_eq!(size_of(contract::TABLE_CLASSIFIER), 100_000);
        assert_eq!(size_of(contract::TABLE_PROFILE), 16384);
        let reg =
            info.registers.iter().find(|r| r.preamble.as_ref().unwrap().id == contract::REG_NEXT_FREE_NS).unwrap();
        assert_eq!(reg.size, 16384);
    }
}
