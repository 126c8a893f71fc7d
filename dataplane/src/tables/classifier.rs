//! The `classifier` table: ternary + range keys with priorities, tuple-space search.
//!
//! Entries are grouped by their mask tuple (the ternary masks, plus "exact" for a range that is a
//! single value). Within a group every entry's masked key is hashed, so a lookup costs one hash
//! probe per group instead of a scan over all entries; true ranges are checked inside the bucket.
//! Groups are ordered by their best priority, so the lookup stops as soon as no later group can
//! beat the match it has. Ties between equal priorities go to the earlier-inserted entry, which
//! keeps the result deterministic (P4Runtime leaves overlapping equal priorities unspecified).
use std::hash::{Hash, Hasher};

use super::hash::FxHashMap;
use super::ProfileSel;

/// The classifier's lookup key (the `meta.*` copies of the contract; absent headers read as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassKey {
    pub ipv6_src: u128,
    pub ipv6_dst: u128,
    pub ipv4_src: u32,
    pub ipv4_dst: u32,
    pub ingress_port: u16,
    pub ether_type: u16,
    pub l4_src_port: u16,
    pub l4_dst_port: u16,
    pub ip_proto: u8,
    pub dscp: u8,
}

impl Hash for ClassKey {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u128(self.ipv6_src);
        h.write_u128(self.ipv6_dst);
        h.write_u64((self.ipv4_src as u64) << 32 | self.ipv4_dst as u64);
        h.write_u64(
            (self.ingress_port as u64) << 48
                | (self.ether_type as u64) << 32
                | (self.l4_src_port as u64) << 16
                | self.l4_dst_port as u64,
        );
        h.write_u16((self.ip_proto as u16) << 8 | self.dscp as u16);
    }
}

impl ClassKey {
    #[inline]
    pub fn and(&self, m: &ClassKey) -> ClassKey {
        ClassKey {
            ipv6_src: self.ipv6_src & m.ipv6_src,
            ipv6_dst: self.ipv6_dst & m.ipv6_dst,
            ipv4_src: self.ipv4_src & m.ipv4_src,
            ipv4_dst: self.ipv4_dst & m.ipv4_dst,
            ingress_port: self.ingress_port & m.ingress_port,
            ether_type: self.ether_type & m.ether_type,
            l4_src_port: self.l4_src_port & m.l4_src_port,
            l4_dst_port: self.l4_dst_port & m.l4_dst_port,
            ip_proto: self.ip_proto & m.ip_proto,
            dscp: self.dscp & m.dscp,
        }
    }
}

/// One classifier entry in native form. Range fields use `sport`/`dport` (inclusive); the
/// `l4_*_port` members of `value`/`mask` are ignored.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub value: ClassKey,
    pub mask: ClassKey,
    pub sport: (u16, u16),
    pub dport: (u16, u16),
    pub priority: i32,
    /// Insertion order, for deterministic ties.
    pub seq: u64,
    pub result: ProfileSel,
}

impl Rule {
    /// Reference semantics (used by the brute-force test and nothing on the fast path).
    pub fn matches(&self, k: &ClassKey) -> bool {
        k.and(&self.mask) == self.value.and(&self.mask)
            && (self.sport.0..=self.sport.1).contains(&k.l4_src_port)
            && (self.dport.0..=self.dport.1).contains(&k.l4_dst_port)
    }
}

#[derive(Debug, Clone, Copy)]
struct Item {
    priority: i32,
    seq: u64,
    sport: (u16, u16),
    dport: (u16, u16),
    result: ProfileSel,
}

impl Item {
    #[inline]
    fn beats(&self, other: &Item) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.seq < other.seq)
    }
    #[inline]
    fn ranges_match(&self, k: &ClassKey) -> bool {
        k.l4_src_port >= self.sport.0
            && k.l4_src_port <= self.sport.1
            && k.l4_dst_port >= self.dport.0
            && k.l4_dst_port <= self.dport.1
    }
}

struct Group {
    mask: ClassKey,
    max_priority: i32,
    /// masked key -> (start, len) in `items`, whose run is sorted best first.
    buckets: FxHashMap<ClassKey, (u32, u32)>,
    items: Vec<Item>,
}

pub struct Classifier {
    groups: Vec<Group>,
    len: usize,
}

impl Classifier {
    pub fn build(rules: &[Rule]) -> Classifier {
        // Group by mask tuple; a single-value range joins the hashed part of the key.
        let mut by_mask: FxHashMap<ClassKey, FxHashMap<ClassKey, Vec<Item>>> = FxHashMap::default();
        for r in rules {
            let mut mask = r.mask;
            let mut value = r.value;
            mask.l4_src_port = if r.sport.0 == r.sport.1 { 0xffff } else { 0 };
            mask.l4_dst_port = if r.dport.0 == r.dport.1 { 0xffff } else { 0 };
            value.l4_src_port = r.sport.0;
            value.l4_dst_port = r.dport.0;
            let item =
                Item { priority: r.priority, seq: r.seq, sport: r.sport, dport: r.dport, result: r.result };
            by_mask.entry(mask).or_default().entry(value.and(&mask)).or_default().push(item);
        }
        let mut groups: Vec<Group> = by_mask
            .into_iter()
            .map(|(mask, buckets)| {
                let mut items = Vec::new();
                let mut index = FxHashMap::default();
                let mut max_priority = i32::MIN;
                for (key, mut v) in buckets {
                    v.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.seq.cmp(&b.seq)));
                    max_priority = max_priority.max(v[0].priority);
                    index.insert(key, (items.len() as u32, v.len() as u32));
                    items.extend(v);
                }
                Group { mask, max_priority, buckets: index, items }
            })
            .collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.max_priority));
        Classifier { groups, len: rules.len() }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of mask tuples (the cost of a lookup that misses).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    #[inline]
    pub fn lookup(&self, key: &ClassKey) -> Option<ProfileSel> {
        let mut best: Option<&Item> = None;
        for g in &self.groups {
            if let Some(b) = best {
                // Groups are sorted by best priority: nothing later can win.
                if b.priority > g.max_priority {
                    break;
                }
            }
            let Some(&(start, n)) = g.buckets.get(&key.and(&g.mask)) else { continue };
            for it in &g.items[start as usize..(start + n) as usize] {
                if let Some(b) = best {
                    if !it.beats(b) {
                        break; // the run is sorted best first
                    }
                }
                if it.ranges_match(key) {
                    best = Some(it);
                    break;
                }
            }
        }
        best.map(|i| i.result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn brute(rules: &[Rule], k: &ClassKey) -> Option<ProfileSel> {
        rules
            .iter()
            .filter(|r| r.matches(k))
            .min_by(|a, b| b.priority.cmp(&a.priority).then(a.seq.cmp(&b.seq)))
            .map(|r| r.result)
    }

    /// Keys and rules drawn from small value sets so that random keys actually hit rules.
    fn small(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
        rng.next_u64() % n
    }

    fn random_key(rng: &mut Xoshiro256PlusPlus) -> ClassKey {
        ClassKey {
            ipv6_src: small(rng, 4) as u128 * 0x2001_0db8 << 96,
            ipv6_dst: small(rng, 4) as u128,
            ipv4_src: 0x0a00_0000 | small(rng, 16) as u32,
            ipv4_dst: 0x0a00_0100 | small(rng, 16) as u32,
            ingress_port: small(rng, 4) as u16,
            ether_type: [0x0800, 0x86dd, 0x0806][small(rng, 3) as usize],
            l4_src_port: small(rng, 64) as u16,
            l4_dst_port: [80, 443, 5201, small(rng, 65536) as u16][small(rng, 4) as usize],
            ip_proto: [6, 17, 1][small(rng, 3) as usize],
            dscp: small(rng, 64) as u8,
        }
    }

    fn random_rule(rng: &mut Xoshiro256PlusPlus, seq: u64) -> Rule {
        let value = random_key(rng);
        // A handful of mask tuples, as a real rule set has.
        let pick = |rng: &mut Xoshiro256PlusPlus, full: u128| if small(rng, 2) == 0 { full } else { 0 };
        let mask = ClassKey {
            ipv6_src: pick(rng, u128::MAX),
            ipv6_dst: 0,
            ipv4_src: [0, 0xffff_ffff, 0xffff_fff8][small(rng, 3) as usize],
            ipv4_dst: pick(rng, 0xffff_ffff) as u32,
            ingress_port: pick(rng, 0x1ff) as u16,
            ether_type: pick(rng, 0xffff) as u16,
            l4_src_port: 0,
            l4_dst_port: 0,
            ip_proto: pick(rng, 0xff) as u8,
            dscp: if small(rng, 4) == 0 { 0x3f } else { 0 },
        };
        let range = |rng: &mut Xoshiro256PlusPlus| match small(rng, 3) {
            0 => (0, 65535),
            1 => {
                let v = [80, 443, 5201][small(rng, 3) as usize];
                (v, v)
            }
            _ => {
                let a = small(rng, 70) as u16;
                (a, a + small(rng, 40) as u16)
            }
        };
        Rule {
            value: value.and(&mask),
            mask,
            sport: range(rng),
            dport: range(rng),
            priority: 1 + small(rng, 50) as i32,
            seq,
            result: ProfileSel { profile_id: seq as u16, direction: (seq & 1) as u8, ue_id: seq as u32, ..Default::default() },
        }
    }

    #[test]
    fn matches_brute_force_on_random_rules() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for round in 0..20 {
            let n = [1usize, 10, 200, 3000][round % 4];
            let rules: Vec<Rule> = (0..n as u64).map(|s| random_rule(&mut rng, s)).collect();
            let c = Classifier::build(&rules);
            let mut hits = 0;
            for _ in 0..2000 {
                let k = random_key(&mut rng);
                let want = brute(&rules, &k);
                hits += want.is_some() as usize;
                assert_eq!(c.lookup(&k), want, "round {round} key {k:?}");
            }
            // The test is only meaningful if keys hit rules.
            assert!(n < 100 || hits > 100, "round {round}: only {hits} hits");
        }
    }

    #[test]
    fn equal_priority_prefers_earlier_entry_across_groups() {
        let any = ClassKey::default();
        let mut port_mask = ClassKey::default();
        port_mask.ingress_port = 0x1ff;
        let mut v = ClassKey::default();
        v.ingress_port = 3;
        let sel = |p| ProfileSel { profile_id: p, ..Default::default() };
        let rules = [
            Rule { value: any, mask: any, sport: (0, 65535), dport: (0, 65535), priority: 5, seq: 0, result: sel(1) },
            Rule { value: v, mask: port_mask, sport: (0, 65535), dport: (0, 65535), priority: 5, seq: 1, result: sel(2) },
        ];
        let c = Classifier::build(&rules);
        assert_eq!(c.lookup(&v), Some(sel(1)));
        assert_eq!(c.group_count(), 2);
    }

    #[test]
    fn large_table_lookup_uses_few_groups() {
        // 64k entries that differ only in ipv4 src (one mask tuple): one probe per lookup.
        let mut mask = ClassKey::default();
        mask.ipv4_src = u32::MAX;
        let rules: Vec<Rule> = (0..65536u32)
            .map(|i| {
                let mut v = ClassKey::default();
                v.ipv4_src = 0x0a00_0000 + i;
                Rule {
                    value: v,
                    mask,
                    sport: (0, 65535),
                    dport: (0, 65535),
                    priority: 10,
                    seq: i as u64,
                    result: ProfileSel { profile_id: (i % 4096) as u16, ue_id: i, ..Default::default() },
                }
            })
            .collect();
        let c = Classifier::build(&rules);
        assert_eq!(c.group_count(), 1);
        let mut k = ClassKey::default();
        k.ipv4_src = 0x0a00_0000 + 40000;
        assert_eq!(c.lookup(&k).unwrap().ue_id, 40000);
        k.ipv4_src = 0x0b00_0000;
        assert_eq!(c.lookup(&k), None);
    }
}
