//! P4Runtime byte strings <-> native integers, and match fields / action calls <-> the store's types.
//!
//! Rules (P4Runtime spec, "Bytestrings" and "Match Format"):
//! - A received string may carry any number of leading zero bytes; what must fit is the value: after
//!   stripping leading zero bits it must be at most `bitwidth` bits wide. An empty string or a
//!   value too wide is OUT_OF_RANGE.
//! - What we send is canonical: the shortest string that holds the value (0 is one zero byte), so a
//!   client reads back exactly what it wrote when it wrote canonically (read-write symmetry).
//! - "Don't care" is expressed by omitting the field: a ternary with mask 0, an LPM with prefix
//!   length 0 or a range covering every value is INVALID_ARGUMENT. Exact fields can never be
//!   omitted. Ternary value bits outside the mask and LPM value bits past the prefix must be 0.

use crate::contract::{ActionDef, KeyDef, MatchKind, TableDef};
use crate::state::{ActionCall, FieldMatch};

use super::error::{P4Error, P4Result};
use super::proto::p4::v1 as pb;

/// Largest value of a `bit<bits>` (bits <= 128).
pub fn max_value(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// Decode an unsigned big-endian byte string that must fit in `bits`; `what` names the field in the
/// error message.
pub fn decode_uint(bytes: &[u8], bits: u32, what: &dyn std::fmt::Display) -> P4Result<u128> {
    if bytes.is_empty() {
        return Err(P4Error::out_of_range(format!("{what}: empty byte string")));
    }
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let significant = &bytes[first..];
    let width = match significant.first() {
        None => 0,
        Some(&b) => (significant.len() as u32 - 1) * 8 + (8 - b.leading_zeros()),
    };
    if width > bits {
        return Err(P4Error::out_of_range(format!(
            "{what}: value 0x{} is {width} bits wide, does not fit in {bits} bits",
            hex(significant)
        )));
    }
    // width <= bits <= 128, so at most 16 significant bytes.
    Ok(significant.iter().fold(0u128, |acc, &b| (acc << 8) | b as u128))
}

/// Canonical (shortest) encoding; 0 is a single zero byte.
pub fn encode_uint(value: u128) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(15);
    bytes[first..].to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn kind_name(k: &MatchKind) -> &'static str {
    match k {
        MatchKind::Exact => "exact",
        MatchKind::Ternary => "ternary",
        MatchKind::Range => "range",
        MatchKind::Lpm => "lpm",
    }
}

fn given_kind_name(m: &pb::field_match::FieldMatchType) -> &'static str {
    use pb::field_match::FieldMatchType as T;
    match m {
        T::Exact(_) => "exact",
        T::Ternary(_) => "ternary",
        T::Lpm(_) => "lpm",
        T::Range(_) => "range",
        T::Optional(_) => "optional",
        T::Other(_) => "other",
    }
}

/// "key 3 (meta.ipv4_src)" — how error messages name a key.
pub struct KeyName<'a>(pub &'a KeyDef);

impl std::fmt::Display for KeyName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "key {} ({})", self.0.id, self.0.name)
    }
}

/// Decode one received match field for `key`.
pub fn decode_field(key: &KeyDef, fm: &pb::FieldMatch) -> P4Result<FieldMatch> {
    use pb::field_match::FieldMatchType as T;
    let name = KeyName(key);
    let Some(given) = fm.field_match_type.as_ref() else {
        return Err(P4Error::invalid(format!("{name}: no match value set")));
    };
    let wrong_kind =
        || P4Error::invalid(format!("{name} has match kind {}, got {}", kind_name(&key.kind), given_kind_name(given)));
    match (&key.kind, given) {
        (MatchKind::Exact, T::Exact(e)) => Ok(FieldMatch::Exact(decode_uint(&e.value, key.bits, &name)?)),
        (MatchKind::Ternary, T::Ternary(t)) => {
            let value = decode_uint(&t.value, key.bits, &format_args!("{name} value"))?;
            let mask = decode_uint(&t.mask, key.bits, &format_args!("{name} mask"))?;
            if mask == 0 {
                return Err(P4Error::invalid(format!(
                    "{name}: ternary mask 0 is a don't-care match; omit the field instead"
                )));
            }
            if value & !mask != 0 {
                return Err(P4Error::invalid(format!(
                    "{name}: value 0x{value:x} has bits set outside mask 0x{mask:x}"
                )));
            }
            Ok(FieldMatch::Ternary { value, mask })
        }
        (MatchKind::Lpm, T::Lpm(l)) => {
            let value = decode_uint(&l.value, key.bits, &name)?;
            if l.prefix_len <= 0 {
                return Err(P4Error::invalid(format!(
                    "{name}: prefix length {} is a don't-care match or invalid; omit the field for don't care",
                    l.prefix_len
                )));
            }
            let plen = l.prefix_len as u32;
            if plen > key.bits {
                return Err(P4Error::invalid(format!(
                    "{name}: prefix length {plen} exceeds the field width {}",
                    key.bits
                )));
            }
            let host_bits = key.bits - plen;
            if host_bits > 0 && value & max_value(host_bits) != 0 {
                return Err(P4Error::invalid(format!(
                    "{name}: value 0x{value:x} has bits set past the /{plen} prefix"
                )));
            }
            Ok(FieldMatch::Lpm { value, prefix_len: plen })
        }
        (MatchKind::Range, T::Range(r)) => {
            let lo = decode_uint(&r.low, key.bits, &format_args!("{name} low"))?;
            let hi = decode_uint(&r.high, key.bits, &format_args!("{name} high"))?;
            if lo > hi {
                return Err(P4Error::invalid(format!("{name}: range low 0x{lo:x} > high 0x{hi:x}")));
            }
            if lo == 0 && hi == max_value(key.bits) {
                return Err(P4Error::invalid(format!(
                    "{name}: range covering every value is a don't-care match; omit the field instead"
                )));
            }
            Ok(FieldMatch::Range { lo, hi })
        }
        _ => Err(wrong_kind()),
    }
}

/// Decode a table entry's match list into one slot per key (in key order; None = don't care).
pub fn decode_matches(table: &TableDef, fields: &[pb::FieldMatch]) -> P4Result<Vec<Option<FieldMatch>>> {
    let mut out: Vec<Option<FieldMatch>> = vec![None; table.keys.len()];
    for fm in fields {
        let Some(pos) = table.keys.iter().position(|k| k.id == fm.field_id) else {
            return Err(P4Error::invalid(format!("table {} has no match field id {}", table.name, fm.field_id)));
        };
        if out[pos].is_some() {
            return Err(P4Error::invalid(format!(
                "table {}: {} given more than once",
                table.name,
                KeyName(&table.keys[pos])
            )));
        }
        out[pos] =
            Some(decode_field(&table.keys[pos], fm).map_err(|e| e.context(format_args!("table {}", table.name)))?);
    }
    for (key, slot) in table.keys.iter().zip(&out) {
        if slot.is_none() && matches!(key.kind, MatchKind::Exact) {
            return Err(P4Error::invalid(format!(
                "table {}: exact {} is missing (exact fields cannot be don't care)",
                table.name,
                KeyName(key)
            )));
        }
    }
    Ok(out)
}

/// Canonical encoding of a stored match (don't-care slots are omitted).
pub fn encode_matches(table: &TableDef, matches: &[Option<FieldMatch>]) -> Vec<pb::FieldMatch> {
    use pb::field_match::FieldMatchType as T;
    table
        .keys
        .iter()
        .zip(matches)
        .filter_map(|(key, m)| {
            let t = match m.as_ref()? {
                FieldMatch::Exact(v) => T::Exact(pb::field_match::Exact { value: encode_uint(*v) }),
                FieldMatch::Ternary { value, mask } => {
                    T::Ternary(pb::field_match::Ternary { value: encode_uint(*value), mask: encode_uint(*mask) })
                }
                FieldMatch::Range { lo, hi } => {
                    T::Range(pb::field_match::Range { low: encode_uint(*lo), high: encode_uint(*hi) })
                }
                FieldMatch::Lpm { value, prefix_len } => {
                    T::Lpm(pb::field_match::Lpm { value: encode_uint(*value), prefix_len: *prefix_len as i32 })
                }
            };
            Some(pb::FieldMatch { field_id: key.id, field_match_type: Some(t) })
        })
        .collect()
}

/// Decode action parameters for `action`: every parameter exactly once, each fitting its width.
pub fn decode_params(action: &ActionDef, params: &[pb::action::Param]) -> P4Result<Vec<u128>> {
    let mut out: Vec<Option<u128>> = vec![None; action.params.len()];
    for p in params {
        let Some(pos) = action.params.iter().position(|d| d.id == p.param_id) else {
            return Err(P4Error::invalid(format!("action {} has no parameter id {}", action.name, p.param_id)));
        };
        let def = &action.params[pos];
        if out[pos].is_some() {
            return Err(P4Error::invalid(format!(
                "action {}: parameter {} ({}) given more than once",
                action.name, def.id, def.name
            )));
        }
        out[pos] = Some(decode_uint(
            &p.value,
            def.bits,
            &format_args!("action {} parameter {} ({})", action.name, def.id, def.name),
        )?);
    }
    action
        .params
        .iter()
        .zip(out)
        .map(|(def, v)| {
            v.ok_or_else(|| {
                P4Error::invalid(format!("action {}: parameter {} ({}) is missing", action.name, def.id, def.name))
            })
        })
        .collect()
}

/// Decode the action of a table entry: it must be one of the table's actions.
pub fn decode_action(table: &TableDef, action: &pb::Action) -> P4Result<ActionCall> {
    if !table.action_ids.contains(&action.action_id) {
        return Err(match crate::contract::action(action.action_id) {
            Some(a) => {
                P4Error::invalid(format!("action {} (id {}) is not an action of table {}", a.name, a.id, table.name))
            }
            None => P4Error::invalid(format!("unknown action id {}", action.action_id)),
        });
    }
    let def = crate::contract::action(action.action_id)
        .ok_or_else(|| P4Error::invalid(format!("unknown action id {}", action.action_id)))?;
    Ok(ActionCall { action_id: def.id, params: decode_params(def, &action.params)? })
}

/// Canonical encoding of an action call.
pub fn encode_action(call: &ActionCall) -> pb::Action {
    let params = match crate::contract::action(call.action_id) {
        Some(def) => def
            .params
            .iter()
            .zip(&call.params)
            .map(|(d, v)| pb::action::Param { param_id: d.id, value: encode_uint(*v) })
            .collect(),
        None => Vec::new(),
    };
    pb::Action { action_id: call.action_id, params }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn d(bytes: &[u8], bits: u32) -> P4Result<u128> {
        decode_uint(bytes, bits, &"f")
    }

    #[test]
    fn spec_valid_examples_decode() {
        // The spec's table of valid encodings.
        assert_eq!(d(b"\x63", 8), Ok(99));
        assert_eq!(d(b"\x00\x63", 16), Ok(99));
        assert_eq!(d(b"\x63", 16), Ok(99));
        assert_eq!(d(b"\x30\x64", 16), Ok(0x3064));
        assert_eq!(d(b"\x00\x30\x64", 16), Ok(0x3064));
        assert_eq!(d(b"\x00\x63", 12), Ok(99));
        assert_eq!(d(b"\x00\x00\x63", 12), Ok(99));
        assert_eq!(d(b"\x00", 16), Ok(0));
        assert_eq!(d(b"\x00\x00", 16), Ok(0));
        assert_eq!(d(&[0xff; 16], 128), Ok(u128::MAX));
        assert_eq!(d(&[0, 0, 0xff], 8), Ok(0xff));
        assert_eq!(d(b"\x01\xff", 9), Ok(0x1ff));
    }

    #[test]
    fn spec_invalid_examples_are_out_of_range() {
        for (bytes, bits) in [
            (&b"\x01\x63"[..], 8),
            (&b""[..], 8),
            (&b"\x01\x00\x63"[..], 16),
            (&b"\x10\x63"[..], 12),
            (&b"\x01\x00\x63"[..], 12),
            (&b"\x00\x40\x63"[..], 12),
            (&b"\x02\x00"[..], 9),
        ] {
            let err = d(bytes, bits).unwrap_err();
            assert_eq!(err.code, Code::OutOfRange, "{bytes:?} bit<{bits}>");
        }
        // 17 significant bytes never fit.
        let mut big = vec![1u8];
        big.extend([0u8; 16]);
        assert_eq!(d(&big, 128).unwrap_err().code, Code::OutOfRange);
        let msg = d(b"\x02\x00", 9).unwrap_err().message;
        assert!(msg.contains("10 bits") && msg.contains("9 bits"), "{msg}");
    }

    #[test]
    fn encoding_is_shortest_and_round_trips() {
        assert_eq!(encode_uint(0), vec![0]);
        assert_eq!(encode_uint(99), vec![0x63]);
        assert_eq!(encode_uint(0x100), vec![1, 0]);
        assert_eq!(encode_uint(u128::MAX), vec![0xff; 16]);
        for v in [0u128, 1, 255, 256, 0x1ff, 0xdead_beef, u64::MAX as u128, u128::MAX >> 1] {
            assert_eq!(d(&encode_uint(v), 128), Ok(v));
        }
    }

    const TERNARY_KEY: KeyDef = KeyDef { id: 3, name: "meta.ipv4_src", bits: 32, kind: MatchKind::Ternary };
    const RANGE_KEY: KeyDef = KeyDef { id: 8, name: "meta.l4_src_port", bits: 16, kind: MatchKind::Range };
    const LPM_KEY: KeyDef = KeyDef { id: 1, name: "dst", bits: 32, kind: MatchKind::Lpm };
    const EXACT_KEY: KeyDef = KeyDef { id: 1, name: "port", bits: 9, kind: MatchKind::Exact };

    fn fm(t: pb::field_match::FieldMatchType) -> pb::FieldMatch {
        pb::FieldMatch { field_id: 0, field_match_type: Some(t) }
    }
    fn tern(v: &[u8], m: &[u8]) -> pb::FieldMatch {
        fm(pb::field_match::FieldMatchType::Ternary(pb::field_match::Ternary { value: v.to_vec(), mask: m.to_vec() }))
    }
    fn range(lo: &[u8], hi: &[u8]) -> pb::FieldMatch {
        fm(pb::field_match::FieldMatchType::Range(pb::field_match::Range { low: lo.to_vec(), high: hi.to_vec() }))
    }
    fn lpm(v: &[u8], p: i32) -> pb::FieldMatch {
        fm(pb::field_match::FieldMatchType::Lpm(pb::field_match::Lpm { value: v.to_vec(), prefix_len: p }))
    }
    fn exact(v: &[u8]) -> pb::FieldMatch {
        fm(pb::field_match::FieldMatchType::Exact(pb::field_match::Exact { value: v.to_vec() }))
    }

    #[test]
    fn ternary_rules() {
        assert_eq!(
            decode_field(&TERNARY_KEY, &tern(b"\x0a\x00\x00\x00", b"\xff\x00\x00\x00")),
            Ok(FieldMatch::Ternary { value: 0x0a00_0000, mask: 0xff00_0000 })
        );
        let e = decode_field(&TERNARY_KEY, &tern(b"\x00", b"\x00")).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("don't-care"), "{}", e.message);
        let e = decode_field(&TERNARY_KEY, &tern(b"\x0f", b"\xf0")).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("outside mask"), "{}", e.message);
        let e = decode_field(&TERNARY_KEY, &tern(b"\x01\x00\x00\x00\x00", b"\xff")).unwrap_err();
        assert_eq!(e.code, Code::OutOfRange);
        assert!(e.message.contains("key 3 (meta.ipv4_src) value"), "{}", e.message);
    }

    #[test]
    fn range_rules() {
        assert_eq!(decode_field(&RANGE_KEY, &range(b"\x00\x50", b"\x50")), Ok(FieldMatch::Range { lo: 80, hi: 80 }));
        assert_eq!(decode_field(&RANGE_KEY, &range(b"\x51", b"\x50")).unwrap_err().code, Code::InvalidArgument);
        let e = decode_field(&RANGE_KEY, &range(b"\x00", b"\xff\xff")).unwrap_err();
        assert!(e.message.contains("don't-care"), "{}", e.message);
        assert_eq!(decode_field(&RANGE_KEY, &range(b"\x00", b"\x01\x00\x00")).unwrap_err().code, Code::OutOfRange);
    }

    #[test]
    fn lpm_rules() {
        assert_eq!(
            decode_field(&LPM_KEY, &lpm(b"\x0a\x00\x00\x00", 8)),
            Ok(FieldMatch::Lpm { value: 0x0a00_0000, prefix_len: 8 })
        );
        assert_eq!(decode_field(&LPM_KEY, &lpm(b"\x0a\x00\x00\x00", 0)).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(decode_field(&LPM_KEY, &lpm(b"\x0a\x00\x00\x01", 8)).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(decode_field(&LPM_KEY, &lpm(b"\x0a", 33)).unwrap_err().code, Code::InvalidArgument);
        assert!(decode_field(&LPM_KEY, &lpm(b"\xff\xff\xff\xff", 32)).is_ok());
    }

    #[test]
    fn kind_mismatch_is_named() {
        let e = decode_field(&EXACT_KEY, &tern(b"\x01", b"\x01")).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert_eq!(e.message, "key 1 (port) has match kind exact, got ternary");
        assert_eq!(decode_field(&EXACT_KEY, &exact(b"\x02\x00")).unwrap_err().code, Code::OutOfRange);
        assert_eq!(decode_field(&EXACT_KEY, &exact(b"\x01\xff")), Ok(FieldMatch::Exact(511)));
        let none = pb::FieldMatch { field_id: 1, field_match_type: None };
        assert_eq!(decode_field(&EXACT_KEY, &none).unwrap_err().code, Code::InvalidArgument);
    }
}
