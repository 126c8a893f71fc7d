//! The `classifier` table: ternary + range keys with priorities, tuple-space search.
//!
//! Entries are grouped by their mask tuple (the ternary masks, plus "exact" for a range that is a
//! single value). Within a group every entry's masked key is hashed, so a lookup costs one hash
//! probe per group instead of a scan over all entries; true ranges are checked inside the bucket.
//! Groups are ordered by their best priority, so the lookup stops as soon as no later group can
//! beat the match it has. Ties between equal priorities go to the earlier-inserted entry, which
//! keeps the result deterministic (P4Runtime leaves overlapping equal priorities unspecified).
use std::collections::BTreeMap;
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

/// The entries of one masked key, best first. The best one is inline (most buckets hold one
/// entry: a lookup reads it from the hash slot, and an empty `more` never allocates).
#[derive(Debug, Clone)]
struct Bucket {
    best: Item,
    more: Vec<Item>,
}

impl Bucket {
    fn insert(&mut self, it: Item) {
        if it.beats(&self.best) {
            let old = std::mem::replace(&mut self.best, it);
            self.more.insert(0, old);
        } else {
            let at = self.more.partition_point(|m| m.beats(&it));
            self.more.insert(at, it);
        }
    }

    /// Removes the item with `seq`; `false` when the bucket is left empty.
    fn remove(&mut self, seq: u64) -> bool {
        if self.best.seq == seq {
            if self.more.is_empty() {
                return false;
            }
            self.best = self.more.remove(0);
        } else if let Some(i) = self.more.iter().position(|m| m.seq == seq) {
            self.more.remove(i);
        }
        true
    }

    fn get_mut(&mut self, seq: u64) -> Option<&mut Item> {
        std::iter::once(&mut self.best).chain(self.more.iter_mut()).find(|m| m.seq == seq)
    }
}

#[derive(Debug, Clone)]
struct Group {
    mask: ClassKey,
    /// The best priority in the group (the lookup's early exit), kept with a count per priority
    /// so that removing an entry does not scan the group.
    max_priority: i32,
    priorities: BTreeMap<i32, u32>,
    buckets: FxHashMap<ClassKey, Bucket>,
}

/// One change to the classifier, in the order a batch made it. `Remove` and `Modify` name the
/// entry by its match (which places it) and its `seq` (which identifies it in its bucket).
#[derive(Debug, Clone, Copy)]
pub enum ClassOp {
    Insert(Rule),
    Modify(Rule),
    Remove(Rule),
}

/// The classifier. Updated in place by [`Classifier::apply`], which costs O(batch), not O(table):
/// the control side keeps two copies and only ever changes the one the data plane is not reading
/// (`state::entries`), so a snapshot is never changed while published.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    /// Sorted by `max_priority`, best first.
    groups: Vec<Group>,
    /// mask -> position in `groups` (control side only).
    by_mask: FxHashMap<ClassKey, usize>,
    len: usize,
}

/// Where a rule lives: its group's mask, its masked key, and its bucket item. A range that is a
/// single value joins the hashed part of the key.
fn placement(r: &Rule) -> (ClassKey, ClassKey, Item) {
    let mut mask = r.mask;
    let mut value = r.value;
    mask.l4_src_port = if r.sport.0 == r.sport.1 { 0xffff } else { 0 };
    mask.l4_dst_port = if r.dport.0 == r.dport.1 { 0xffff } else { 0 };
    value.l4_src_port = r.sport.0;
    value.l4_dst_port = r.dport.0;
    let item = Item { priority: r.priority, seq: r.seq, sport: r.sport, dport: r.dport, result: r.result };
    (mask, value.and(&mask), item)
}

impl Classifier {
    pub fn build(rules: &[Rule]) -> Classifier {
        let mut c = Classifier::default();
        let ops: Vec<ClassOp> = rules.iter().map(|r| ClassOp::Insert(*r)).collect();
        c.apply(&ops);
        c
    }

    /// Applies a batch of changes. An op on an entry that is not there (a `Remove` or `Modify`
    /// the store did not accept never gets here) is ignored.
    pub fn apply(&mut self, ops: &[ClassOp]) {
        let mut reorder = false;
        for op in ops {
            match op {
                ClassOp::Insert(r) => reorder |= self.insert(r),
                ClassOp::Remove(r) => reorder |= self.remove(r),
                ClassOp::Modify(r) => {
                    let (mask, key, item) = placement(r);
                    let Some(&gi) = self.by_mask.get(&mask) else { continue };
                    if let Some(it) = self.groups[gi].buckets.get_mut(&key).and_then(|b| b.get_mut(item.seq)) {
                        it.result = item.result;
                    }
                }
            }
        }
        if reorder {
            // Once per batch: the lookup's early exit needs groups best first.
            self.groups.retain(|g| !g.buckets.is_empty());
            self.groups.sort_by_key(|g| std::cmp::Reverse(g.max_priority));
            self.by_mask = self.groups.iter().enumerate().map(|(i, g)| (g.mask, i)).collect();
        }
    }

    /// Returns whether the group order may have changed.
    fn insert(&mut self, r: &Rule) -> bool {
        let (mask, key, item) = placement(r);
        let (gi, new_group) = match self.by_mask.get(&mask) {
            Some(&gi) => (gi, false),
            None => {
                self.groups.push(Group {
                    mask,
                    max_priority: i32::MIN,
                    priorities: BTreeMap::new(),
                    buckets: FxHashMap::default(),
                });
                self.by_mask.insert(mask, self.groups.len() - 1);
                (self.groups.len() - 1, true)
            }
        };
        let g = &mut self.groups[gi];
        match g.buckets.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut b) => b.get_mut().insert(item),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Bucket { best: item, more: Vec::new() });
            }
        }
        *g.priorities.entry(item.priority).or_default() += 1;
        self.len += 1;
        let raised = item.priority > g.max_priority;
        g.max_priority = g.max_priority.max(item.priority);
        new_group || raised
    }

    fn remove(&mut self, r: &Rule) -> bool {
        let (mask, key, item) = placement(r);
        let Some(&gi) = self.by_mask.get(&mask) else { return false };
        let g = &mut self.groups[gi];
        let Some(b) = g.buckets.get_mut(&key) else { return false };
        if b.get_mut(item.seq).is_none() {
            return false;
        }
        if !b.remove(item.seq) {
            g.buckets.remove(&key);
        }
        self.len -= 1;
        if let std::collections::btree_map::Entry::Occupied(mut n) = g.priorities.entry(item.priority) {
            *n.get_mut() -= 1;
            if *n.get() == 0 {
                n.remove();
            }
        }
        let best = g.priorities.keys().next_back().copied().unwrap_or(i32::MIN);
        let lowered = best != g.max_priority;
        g.max_priority = best;
        lowered || g.buckets.is_empty()
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
            let Some(bucket) = g.buckets.get(&key.and(&g.mask)) else { continue };
            for it in std::iter::once(&bucket.best).chain(bucket.more.iter()) {
                if let Some(b) = best {
                    if !it.beats(b) {
                        break; // the bucket is sorted best first
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
            ipv6_src: (small(rng, 4) as u128 * 0x2001_0db8) << 96,
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
            result: ProfileSel {
                profile_id: seq as u16,
                direction: (seq & 1) as u8,
                ue_id: seq as u32,
                ..Default::default()
            },
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

    /// Random inserts, removals and modifies applied in batches to one classifier give the same
    /// lookups as the brute-force reference over the rules that are left (and as a rebuild).
    #[test]
    fn incremental_batches_match_brute_force() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut c = Classifier::default();
        let mut live: Vec<Rule> = Vec::new();
        let mut seq = 0u64;
        for round in 0..60 {
            let mut ops = Vec::new();
            for _ in 0..small(&mut rng, 80) {
                match small(&mut rng, 4) {
                    0 | 1 => {
                        seq += 1;
                        let r = random_rule(&mut rng, seq);
                        live.push(r);
                        ops.push(ClassOp::Insert(r));
                    }
                    2 if !live.is_empty() => {
                        let r = live.swap_remove(small(&mut rng, live.len() as u64) as usize);
                        ops.push(ClassOp::Remove(r));
                    }
                    3 if !live.is_empty() => {
                        let i = small(&mut rng, live.len() as u64) as usize;
                        live[i].result.profile_id = live[i].result.profile_id.wrapping_add(1000);
                        ops.push(ClassOp::Modify(live[i]));
                    }
                    _ => {}
                }
            }
            c.apply(&ops);
            assert_eq!(c.len(), live.len());
            let rebuilt = Classifier::build(&live);
            assert_eq!(c.group_count(), rebuilt.group_count(), "round {round}");
            for _ in 0..500 {
                let k = random_key(&mut rng);
                let want = brute(&live, &k);
                assert_eq!(c.lookup(&k), want, "round {round} key {k:?}");
                assert_eq!(rebuilt.lookup(&k), want);
            }
        }
    }

    #[test]
    fn equal_priority_prefers_earlier_entry_across_groups() {
        let any = ClassKey::default();
        let port_mask = ClassKey { ingress_port: 0x1ff, ..Default::default() };
        let v = ClassKey { ingress_port: 3, ..Default::default() };
        let sel = |p| ProfileSel { profile_id: p, ..Default::default() };
        let rules = [
            Rule { value: any, mask: any, sport: (0, 65535), dport: (0, 65535), priority: 5, seq: 0, result: sel(1) },
            Rule {
                value: v,
                mask: port_mask,
                sport: (0, 65535),
                dport: (0, 65535),
                priority: 5,
                seq: 1,
                result: sel(2),
            },
        ];
        let c = Classifier::build(&rules);
        assert_eq!(c.lookup(&v), Some(sel(1)));
        assert_eq!(c.group_count(), 2);
    }

    #[test]
    fn large_table_lookup_uses_few_groups() {
        // 64k entries that differ only in ipv4 src (one mask tuple): one probe per lookup.
        let mask = ClassKey { ipv4_src: u32::MAX, ..Default::default() };
        let rules: Vec<Rule> = (0..65536u32)
            .map(|i| {
                let v = ClassKey { ipv4_src: 0x0a00_0000 + i, ..Default::default() };
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
        let mut k = ClassKey { ipv4_src: 0x0a00_0000 + 40000, ..Default::default() };
        assert_eq!(c.lookup(&k).unwrap().ue_id, 40000);
        k.ipv4_src = 0x0b00_0000;
        assert_eq!(c.lookup(&k), None);
    }
}
