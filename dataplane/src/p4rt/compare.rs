//! Does a P4Info pushed with SetForwardingPipelineConfig describe *this* target's pipeline?
//!
//! The target is fixed-function, so "realizing" a config means the pushed P4Info must describe the
//! same objects: the same ids and names, the same keys with the same match kinds and bit widths,
//! the same actions and parameters, counters, registers, digests and controller headers. Sizes may
//! be smaller than ours (we can hold at least that many entries) but not larger. Documentation,
//! annotations, aliases and pkg_info are descriptive only and are ignored.
//!
//! The result names the FIRST difference, in a fixed order (tables, actions, counters, registers,
//! digests, controller headers, unsupported object kinds), e.g.
//! `table P4netemIngress.classifier key 3 (meta.ipv4_src): bitwidth 32 expected, got 16`.

use std::collections::HashMap;

use super::codec::decode_uint;
use super::proto::p4::config::v1 as cfg;

type Check = Result<(), String>;

fn id_hex(id: u32) -> String {
    format!("0x{id:08x}")
}

fn find_by_id<T>(items: &[T], id: u32, get: impl Fn(&T) -> u32) -> Option<&T> {
    items.iter().find(|t| get(t) == id)
}

fn preamble(p: &Option<cfg::Preamble>) -> (u32, &str) {
    p.as_ref().map_or((0, ""), |p| (p.id, p.name.as_str()))
}

/// Compare the pushed P4Info (`got`) with the target's own (`ours`).
pub fn compare(ours: &cfg::P4Info, got: &cfg::P4Info) -> Check {
    compare_objects("table", &ours.tables, &got.tables, |t| &t.preamble, |o, g, name| compare_table(o, g, name, ours))?;
    compare_objects("action", &ours.actions, &got.actions, |a| &a.preamble, compare_action)?;
    compare_objects("counter", &ours.counters, &got.counters, |c| &c.preamble, compare_counter)?;
    compare_objects("register", &ours.registers, &got.registers, |r| &r.preamble, compare_register)?;
    compare_objects(
        "digest",
        &ours.digests,
        &got.digests,
        |d| &d.preamble,
        |o, g, name| compare_type_spec(&format!("digest {name}"), &o.type_spec, ours, &g.type_spec, got),
    )?;
    compare_objects(
        "controller packet metadata",
        &ours.controller_packet_metadata,
        &got.controller_packet_metadata,
        |c| &c.preamble,
        compare_controller_header,
    )?;
    for (kind, n) in [
        ("action profiles", got.action_profiles.len()),
        ("direct counters", got.direct_counters.len()),
        ("meters", got.meters.len()),
        ("direct meters", got.direct_meters.len()),
        ("value sets", got.value_sets.len()),
        ("externs", got.externs.len()),
    ] {
        if n > 0 {
            return Err(format!("P4Info has {n} {kind}; this target has none"));
        }
    }
    Ok(())
}

/// Match objects of one kind by id: every one of ours must be there with the same name and pass
/// `each`; any extra object is unknown to the target.
fn compare_objects<T>(
    kind: &str,
    ours: &[T],
    got: &[T],
    pre: impl Fn(&T) -> &Option<cfg::Preamble>,
    each: impl Fn(&T, &T, &str) -> Check,
) -> Check {
    for o in ours {
        let (id, name) = preamble(pre(o));
        let Some(g) = find_by_id(got, id, |g| preamble(pre(g)).0) else {
            return Err(format!("{kind} {name} (id {}) is missing", id_hex(id)));
        };
        let (_, gname) = preamble(pre(g));
        if gname != name {
            return Err(format!("{kind} id {}: name {name} expected, got {gname}", id_hex(id)));
        }
        each(o, g, name)?;
    }
    for g in got {
        let (id, name) = preamble(pre(g));
        if find_by_id(ours, id, |o| preamble(pre(o)).0).is_none() {
            return Err(format!("{kind} {name} (id {}) is unknown to this target", id_hex(id)));
        }
    }
    Ok(())
}

fn match_type_name(m: &Option<cfg::match_field::Match>) -> String {
    match m {
        Some(cfg::match_field::Match::MatchType(t)) => cfg::match_field::MatchType::try_from(*t)
            .map(|t| t.as_str_name().to_string())
            .unwrap_or_else(|_| format!("match type {t}")),
        Some(cfg::match_field::Match::OtherMatchType(s)) => s.clone(),
        None => "UNSPECIFIED".to_string(),
    }
}

fn scope_name(s: i32) -> String {
    cfg::action_ref::Scope::try_from(s).map(|s| s.as_str_name().to_string()).unwrap_or_else(|_| format!("scope {s}"))
}

fn compare_table(o: &cfg::Table, g: &cfg::Table, name: &str, ours: &cfg::P4Info) -> Check {
    let t = format!("table {name}");
    for ok in &o.match_fields {
        let Some(gk) = g.match_fields.iter().find(|k| k.id == ok.id) else {
            return Err(format!("{t} key {} ({}) is missing", ok.id, ok.name));
        };
        let kn = format!("{t} key {} ({})", ok.id, ok.name);
        if gk.name != ok.name {
            return Err(format!("{kn}: name {} expected, got {}", ok.name, gk.name));
        }
        if gk.bitwidth != ok.bitwidth {
            return Err(format!("{kn}: bitwidth {} expected, got {}", ok.bitwidth, gk.bitwidth));
        }
        if gk.r#match != ok.r#match {
            return Err(format!(
                "{kn}: match kind {} expected, got {}",
                match_type_name(&ok.r#match),
                match_type_name(&gk.r#match)
            ));
        }
    }
    for gk in &g.match_fields {
        if !o.match_fields.iter().any(|k| k.id == gk.id) {
            return Err(format!("{t} key {} ({}) is unknown to this target", gk.id, gk.name));
        }
    }
    let action_name = |id: u32| {
        find_by_id(&ours.actions, id, |a| preamble(&a.preamble).0)
            .map_or_else(|| id_hex(id), |a| preamble(&a.preamble).1.to_string())
    };
    for oref in &o.action_refs {
        let Some(gref) = g.action_refs.iter().find(|r| r.id == oref.id) else {
            return Err(format!("{t}: action {} (id {}) is missing", action_name(oref.id), id_hex(oref.id)));
        };
        if gref.scope != oref.scope {
            return Err(format!(
                "{t}: action {} scope {} expected, got {}",
                action_name(oref.id),
                scope_name(oref.scope),
                scope_name(gref.scope)
            ));
        }
    }
    for gref in &g.action_refs {
        if !o.action_refs.iter().any(|r| r.id == gref.id) {
            return Err(format!("{t}: action id {} is not an action of this table on the target", id_hex(gref.id)));
        }
    }
    if g.const_default_action_id != o.const_default_action_id {
        return Err(format!(
            "{t}: const default action id {} expected, got {}",
            id_hex(o.const_default_action_id),
            id_hex(g.const_default_action_id)
        ));
    }
    // Older compilers do not emit initial_default_action; when present it must be ours.
    if let (Some(oa), Some(ga)) = (&o.initial_default_action, &g.initial_default_action) {
        if oa.action_id != ga.action_id {
            return Err(format!(
                "{t}: initial default action {} expected, got {}",
                action_name(oa.action_id),
                action_name(ga.action_id)
            ));
        }
        let widths: HashMap<u32, i32> = find_by_id(&ours.actions, oa.action_id, |a| preamble(&a.preamble).0)
            .map(|a| a.params.iter().map(|p| (p.id, p.bitwidth)).collect())
            .unwrap_or_default();
        let value = |args: &[cfg::table_action_call::Argument], id: u32| {
            let bits = widths.get(&id).copied().unwrap_or(128).max(0) as u32;
            args.iter().find(|a| a.param_id == id).map(|a| decode_uint(&a.value, bits, &"").ok())
        };
        for oarg in &oa.arguments {
            if value(&ga.arguments, oarg.param_id) != value(&oa.arguments, oarg.param_id) {
                return Err(format!(
                    "{t}: initial default action {} parameter {} differs from the target's",
                    action_name(oa.action_id),
                    oarg.param_id
                ));
            }
        }
    }
    if g.size > o.size {
        return Err(format!("{t}: size {} exceeds this target's capacity {}", g.size, o.size));
    }
    if g.implementation_id != 0 {
        return Err(format!("{t}: implementation (action profile) {} is not supported", id_hex(g.implementation_id)));
    }
    if !g.direct_resource_ids.is_empty() {
        return Err(format!("{t}: direct resources are not supported"));
    }
    if g.idle_timeout_behavior != o.idle_timeout_behavior {
        return Err(format!("{t}: idle timeout is not supported"));
    }
    if g.is_const_table != o.is_const_table || g.has_initial_entries != o.has_initial_entries {
        return Err(format!("{t}: const/initial entries differ from the target's"));
    }
    Ok(())
}

fn compare_action(o: &cfg::Action, g: &cfg::Action, name: &str) -> Check {
    let a = format!("action {name}");
    for op in &o.params {
        let Some(gp) = g.params.iter().find(|p| p.id == op.id) else {
            return Err(format!("{a} parameter {} ({}) is missing", op.id, op.name));
        };
        let pn = format!("{a} parameter {} ({})", op.id, op.name);
        if gp.name != op.name {
            return Err(format!("{pn}: name {} expected, got {}", op.name, gp.name));
        }
        if gp.bitwidth != op.bitwidth {
            return Err(format!("{pn}: bitwidth {} expected, got {}", op.bitwidth, gp.bitwidth));
        }
    }
    for gp in &g.params {
        if !o.params.iter().any(|p| p.id == gp.id) {
            return Err(format!("{a} parameter {} ({}) is unknown to this target", gp.id, gp.name));
        }
    }
    Ok(())
}

fn unit_name(spec: &Option<cfg::CounterSpec>) -> String {
    let u = spec.as_ref().map_or(0, |s| s.unit);
    cfg::counter_spec::Unit::try_from(u).map(|u| u.as_str_name().to_string()).unwrap_or_else(|_| format!("unit {u}"))
}

fn compare_counter(o: &cfg::Counter, g: &cfg::Counter, name: &str) -> Check {
    if unit_name(&g.spec) != unit_name(&o.spec) {
        return Err(format!("counter {name}: unit {} expected, got {}", unit_name(&o.spec), unit_name(&g.spec)));
    }
    if g.size > o.size {
        return Err(format!("counter {name}: size {} exceeds this target's size {}", g.size, o.size));
    }
    Ok(())
}

fn compare_register(o: &cfg::Register, g: &cfg::Register, name: &str) -> Check {
    let r = format!("register {name}");
    match (bit_width(&o.type_spec), bit_width(&g.type_spec)) {
        (Some(ow), Some(gw)) if ow != gw => return Err(format!("{r}: bitwidth {ow} expected, got {gw}")),
        (Some(ow), None) => return Err(format!("{r}: type bit<{ow}> expected, got {}", type_desc(&g.type_spec))),
        _ => {}
    }
    if g.size > o.size {
        return Err(format!("{r}: size {} exceeds this target's size {}", g.size, o.size));
    }
    Ok(())
}

fn controller_metadata_name(p: &Option<cfg::Preamble>) -> &str {
    preamble(p).1
}

fn compare_controller_header(o: &cfg::ControllerPacketMetadata, g: &cfg::ControllerPacketMetadata, _: &str) -> Check {
    let c = format!("controller packet metadata {}", controller_metadata_name(&o.preamble));
    for om in &o.metadata {
        let Some(gm) = g.metadata.iter().find(|m| m.id == om.id) else {
            return Err(format!("{c} field {} ({}) is missing", om.id, om.name));
        };
        let f = format!("{c} field {} ({})", om.id, om.name);
        if gm.name != om.name {
            return Err(format!("{f}: name {} expected, got {}", om.name, gm.name));
        }
        if gm.bitwidth != om.bitwidth {
            return Err(format!("{f}: bitwidth {} expected, got {}", om.bitwidth, gm.bitwidth));
        }
    }
    for gm in &g.metadata {
        if !o.metadata.iter().any(|m| m.id == gm.id) {
            return Err(format!("{c} field {} ({}) is unknown to this target", gm.id, gm.name));
        }
    }
    Ok(())
}

pub(super) fn bit_width(t: &Option<cfg::P4DataTypeSpec>) -> Option<i32> {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as T;
    match t.as_ref()?.type_spec.as_ref()? {
        T::Bitstring(b) => match b.type_spec.as_ref()? {
            B::Bit(bit) => Some(bit.bitwidth),
            _ => None,
        },
        _ => None,
    }
}

fn type_desc(t: &Option<cfg::P4DataTypeSpec>) -> String {
    use cfg::p4_data_type_spec::TypeSpec as T;
    match t.as_ref().and_then(|t| t.type_spec.as_ref()) {
        None => "no type".into(),
        Some(T::Bitstring(_)) => match bit_width(t) {
            Some(w) => format!("bit<{w}>"),
            None => "a signed or varbit bitstring".into(),
        },
        Some(T::Struct(n)) => format!("struct {}", n.name),
        Some(T::Header(n)) => format!("header {}", n.name),
        Some(other) => format!("{other:?}"),
    }
}

/// A struct's members as (name, bitwidth if bit<W>).
type Members = Vec<(String, Option<i32>)>;

/// Name and members of a struct-typed spec, resolved through `info.type_info`.
fn struct_members(t: &Option<cfg::P4DataTypeSpec>, info: &cfg::P4Info) -> Option<(String, Members)> {
    use cfg::p4_data_type_spec::TypeSpec as T;
    let Some(T::Struct(n)) = t.as_ref()?.type_spec.as_ref() else {
        return None;
    };
    let spec = info.type_info.as_ref()?.structs.get(&n.name)?;
    Some((n.name.clone(), spec.members.iter().map(|m| (m.name.clone(), bit_width(&m.type_spec))).collect()))
}

fn compare_type_spec(
    what: &str,
    o: &Option<cfg::P4DataTypeSpec>,
    ours: &cfg::P4Info,
    g: &Option<cfg::P4DataTypeSpec>,
    got: &cfg::P4Info,
) -> Check {
    match struct_members(o, ours) {
        Some((oname, omembers)) => {
            let Some((gname, gmembers)) = struct_members(g, got) else {
                return Err(format!(
                    "{what}: type struct {oname} expected, got {} (or its type_info entry is missing)",
                    type_desc(g)
                ));
            };
            if gname != oname {
                return Err(format!("{what}: type struct {oname} expected, got struct {gname}"));
            }
            for (i, (on, ow)) in omembers.iter().enumerate() {
                let Some((gn, gw)) = gmembers.get(i) else {
                    return Err(format!("{what}: field {on} is missing"));
                };
                if gn != on {
                    return Err(format!("{what}: field {} is {on} expected, got {gn}", i + 1));
                }
                if gw != ow {
                    let show = |w: &Option<i32>| w.map_or("not a bit<W>".to_string(), |w| w.to_string());
                    return Err(format!("{what}: field {on} bitwidth {} expected, got {}", show(ow), show(gw)));
                }
            }
            if gmembers.len() > omembers.len() {
                return Err(format!("{what}: field {} is unknown to this target", gmembers[omembers.len()].0));
            }
            Ok(())
        }
        None => match (bit_width(o), bit_width(g)) {
            (Some(ow), Some(gw)) if ow == gw => Ok(()),
            _ => Err(format!("{what}: type {} expected, got {}", type_desc(o), type_desc(g))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre(id: u32, name: &str) -> Option<cfg::Preamble> {
        Some(cfg::Preamble {
            id,
            name: name.into(),
            alias: name.rsplit('.').next().unwrap().into(),
            ..Default::default()
        })
    }
    fn bits(w: i32) -> Option<cfg::P4DataTypeSpec> {
        Some(cfg::P4DataTypeSpec {
            type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Bitstring(cfg::P4BitstringLikeTypeSpec {
                type_spec: Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(cfg::P4BitTypeSpec { bitwidth: w })),
                ..Default::default()
            })),
        })
    }
    fn key(id: u32, name: &str, w: i32, t: cfg::match_field::MatchType) -> cfg::MatchField {
        cfg::MatchField {
            id,
            name: name.into(),
            bitwidth: w,
            r#match: Some(cfg::match_field::Match::MatchType(t as i32)),
            ..Default::default()
        }
    }

    fn sample() -> cfg::P4Info {
        use cfg::match_field::MatchType as M;
        let mut type_info = cfg::P4TypeInfo::default();
        type_info.structs.insert(
            "mac_learn_digest_t".into(),
            cfg::P4StructTypeSpec {
                members: vec![
                    cfg::p4_struct_type_spec::Member { name: "src_addr".into(), type_spec: bits(48) },
                    cfg::p4_struct_type_spec::Member { name: "ingress_port".into(), type_spec: bits(9) },
                ],
                ..Default::default()
            },
        );
        cfg::P4Info {
            pkg_info: Some(cfg::PkgInfo { arch: "v1model".into(), ..Default::default() }),
            tables: vec![cfg::Table {
                preamble: pre(0x0200_0004, "P4netemIngress.classifier"),
                match_fields: vec![
                    key(1, "standard_metadata.ingress_port", 9, M::Ternary),
                    key(3, "meta.ipv4_src", 32, M::Ternary),
                ],
                action_refs: vec![cfg::ActionRef { id: 0x0100_0005, ..Default::default() }],
                size: 65536,
                ..Default::default()
            }],
            actions: vec![cfg::Action {
                preamble: pre(0x0100_0005, "P4netemIngress.set_profile"),
                params: vec![cfg::action::Param {
                    id: 1,
                    name: "profile_id".into(),
                    bitwidth: 16,
                    ..Default::default()
                }],
            }],
            counters: vec![cfg::Counter {
                preamble: pre(0x1200_0001, "P4netemIngress.profile_in"),
                spec: Some(cfg::CounterSpec { unit: cfg::counter_spec::Unit::Both as i32 }),
                size: 8192,
                ..Default::default()
            }],
            registers: vec![cfg::Register {
                preamble: pre(0x1600_0001, "P4netemIngress.next_free_ns"),
                type_spec: bits(64),
                size: 8192,
                ..Default::default()
            }],
            digests: vec![cfg::Digest {
                preamble: pre(0x1700_0001, "mac_learn_digest_t"),
                type_spec: Some(cfg::P4DataTypeSpec {
                    type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Struct(cfg::P4NamedType {
                        name: "mac_learn_digest_t".into(),
                    })),
                }),
            }],
            controller_packet_metadata: vec![cfg::ControllerPacketMetadata {
                preamble: pre(0x0400_0002, "packet_out"),
                metadata: vec![cfg::controller_packet_metadata::Metadata {
                    id: 1,
                    name: "egress_port".into(),
                    bitwidth: 9,
                    ..Default::default()
                }],
            }],
            type_info: Some(type_info),
            ..Default::default()
        }
    }

    fn mismatch(f: impl FnOnce(&mut cfg::P4Info)) -> String {
        let ours = sample();
        let mut got = sample();
        f(&mut got);
        compare(&ours, &got).unwrap_err()
    }

    #[test]
    fn identical_and_cosmetic_differences_pass() {
        let ours = sample();
        let mut got = sample();
        got.pkg_info = Some(cfg::PkgInfo { name: "other".into(), arch: "psa".into(), ..Default::default() });
        got.tables[0].preamble.as_mut().unwrap().alias = "x".into();
        got.tables[0].preamble.as_mut().unwrap().annotations.push("@brief(\"x\")".into());
        got.actions[0].preamble.as_mut().unwrap().doc =
            Some(cfg::Documentation { brief: "b".into(), ..Default::default() });
        got.tables[0].match_fields.reverse();
        got.tables[0].size = 1024; // smaller than our capacity is fine
        assert_eq!(compare(&ours, &got), Ok(()));
    }

    #[test]
    fn key_bitwidth_mismatch_is_named() {
        let m = mismatch(|g| g.tables[0].match_fields[1].bitwidth = 16);
        assert_eq!(m, "table P4netemIngress.classifier key 3 (meta.ipv4_src): bitwidth 32 expected, got 16");
    }

    #[test]
    fn first_mismatch_wins() {
        let m = mismatch(|g| {
            g.tables[0].match_fields[0].bitwidth = 8;
            g.tables[0].match_fields[1].bitwidth = 16;
            g.registers[0].size = 1;
        });
        assert_eq!(
            m,
            "table P4netemIngress.classifier key 1 (standard_metadata.ingress_port): bitwidth 9 expected, got 8"
        );
    }

    #[test]
    fn every_kind_of_difference_is_reported() {
        use cfg::match_field::MatchType as M;
        type Mutation = Box<dyn FnOnce(&mut cfg::P4Info)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|g| g.tables[0].match_fields[1].r#match = Some(cfg::match_field::Match::MatchType(M::Exact as i32))),
             "table P4netemIngress.classifier key 3 (meta.ipv4_src): match kind TERNARY expected, got EXACT"),
            (Box::new(|g| g.tables[0].match_fields[1].name = "meta.ipv4_dst".into()),
             "table P4netemIngress.classifier key 3 (meta.ipv4_src): name meta.ipv4_src expected, got meta.ipv4_dst"),
            (Box::new(|g| { g.tables[0].match_fields.pop(); }),
             "table P4netemIngress.classifier key 3 (meta.ipv4_src) is missing"),
            (Box::new(|g| g.tables[0].match_fields.push(key(4, "meta.x", 8, M::Exact))),
             "table P4netemIngress.classifier key 4 (meta.x) is unknown to this target"),
            (Box::new(|g| g.tables[0].preamble.as_mut().unwrap().name = "P4netemIngress.cls".into()),
             "table id 0x02000004: name P4netemIngress.classifier expected, got P4netemIngress.cls"),
            (Box::new(|g| g.tables[0].preamble.as_mut().unwrap().id = 0x0200_0009),
             "table P4netemIngress.classifier (id 0x02000004) is missing"),
            (Box::new(|g| g.tables[0].size = 70000),
             "table P4netemIngress.classifier: size 70000 exceeds this target's capacity 65536"),
            (Box::new(|g| g.tables[0].action_refs.clear()),
             "table P4netemIngress.classifier: action P4netemIngress.set_profile (id 0x01000005) is missing"),
            (Box::new(|g| g.tables[0].action_refs[0].scope = cfg::action_ref::Scope::TableOnly as i32),
             "table P4netemIngress.classifier: action P4netemIngress.set_profile scope TABLE_AND_DEFAULT expected, got TABLE_ONLY"),
            (Box::new(|g| g.actions[0].params[0].bitwidth = 8),
             "action P4netemIngress.set_profile parameter 1 (profile_id): bitwidth 16 expected, got 8"),
            (Box::new(|g| g.actions.push(cfg::Action { preamble: pre(0x0100_0099, "x"), params: vec![] })),
             "action x (id 0x01000099) is unknown to this target"),
            (Box::new(|g| g.counters[0].spec = Some(cfg::CounterSpec { unit: cfg::counter_spec::Unit::Packets as i32 })),
             "counter P4netemIngress.profile_in: unit BOTH expected, got PACKETS"),
            (Box::new(|g| g.registers[0].type_spec = bits(32)),
             "register P4netemIngress.next_free_ns: bitwidth 64 expected, got 32"),
            (Box::new(|g| g.registers[0].size = 9000),
             "register P4netemIngress.next_free_ns: size 9000 exceeds this target's size 8192"),
            (Box::new(|g| g.type_info.as_mut().unwrap().structs.get_mut("mac_learn_digest_t").unwrap().members[1].type_spec = bits(16)),
             "digest mac_learn_digest_t: field ingress_port bitwidth 9 expected, got 16"),
            (Box::new(|g| g.digests[0].type_spec = bits(57)),
             "digest mac_learn_digest_t: type struct mac_learn_digest_t expected, got bit<57> (or its type_info entry is missing)"),
            (Box::new(|g| g.controller_packet_metadata[0].metadata[0].bitwidth = 16),
             "controller packet metadata packet_out field 1 (egress_port): bitwidth 9 expected, got 16"),
            (Box::new(|g| g.meters.push(cfg::Meter::default())),
             "P4Info has 1 meters; this target has none"),
        ];
        for (f, want) in cases {
            assert_eq!(mismatch(f), want);
        }
    }
}
