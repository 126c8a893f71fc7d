//! Digest batching (P4Runtime spec, "DigestEntry"): the per-digest configuration written with
//! DigestEntry, the buffer of digest messages waiting to be sent as one DigestList, and the cache
//! of sent-but-unacknowledged messages that suppresses duplicates.
//!
//! Pure bookkeeping with time passed in, so it can be tested without a clock; the server task owns
//! the timing (see `server.rs`). A list is sent when `max_list_size` distinct messages are buffered
//! or `max_timeout_ns` after the first one arrived; a message already buffered or cached is
//! dropped; cache entries leave on DigestListAck or after `ack_timeout_ns`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::state::UpdateKind;

use super::error::{P4Error, P4Result};

/// With `max_list_size` 0 ("no limit") a list is still cut at this many messages, which the spec
/// allows ("the server can use any non-zero value"); it bounds memory under a flood.
pub const UNLIMITED_LIST_CAP: usize = 4096;
/// At most this many sent messages are remembered for duplicate suppression; beyond it, lists
/// are sent but not cached (the spec treats digest loss and duplicates as non-critical).
pub const CACHE_CAP: usize = 65536;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DigestConfig {
    pub max_timeout_ns: i64,
    pub max_list_size: i32,
    pub ack_timeout_ns: i64,
}

impl DigestConfig {
    pub fn validate(&self) -> P4Result<()> {
        if self.max_timeout_ns < 0 || self.ack_timeout_ns < 0 || self.max_list_size < 0 {
            return Err(P4Error::invalid(format!(
                "digest config values must not be negative (max_timeout_ns {}, max_list_size {}, ack_timeout_ns {})",
                self.max_timeout_ns, self.max_list_size, self.ack_timeout_ns
            )));
        }
        Ok(())
    }
    fn list_cap(&self) -> usize {
        if self.max_timeout_ns == 0 {
            1
        } else if self.max_list_size == 0 {
            UNLIMITED_LIST_CAP
        } else {
            (self.max_list_size as usize).min(UNLIMITED_LIST_CAP)
        }
    }
}

/// A DigestList ready to be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutList {
    pub digest_id: u32,
    pub list_id: u64,
    pub data: Vec<Vec<u128>>,
}

struct Buffer {
    items: Vec<Vec<u128>>,
    set: HashSet<Vec<u128>>,
    first: Instant,
}

struct Sent {
    items: Vec<Vec<u128>>,
    at: Instant,
}

#[derive(Default)]
pub struct DigestEngine {
    configs: BTreeMap<u32, DigestConfig>,
    buffers: HashMap<u32, Buffer>,
    /// (digest_id, list_id) -> the list's messages, awaiting ack.
    sent: HashMap<(u32, u64), Sent>,
    /// Every message held in `sent`, for duplicate suppression.
    cached: HashSet<(u32, Vec<u128>)>,
    next_list_id: u64,
}

impl DigestEngine {
    pub fn new() -> Self {
        DigestEngine { next_list_id: 1, ..Default::default() }
    }

    pub fn config(&self, digest_id: u32) -> Option<DigestConfig> {
        self.configs.get(&digest_id).copied()
    }

    pub fn configs(&self) -> impl Iterator<Item = (u32, DigestConfig)> + '_ {
        self.configs.iter().map(|(&k, &v)| (k, v))
    }

    /// DigestEntry INSERT: enable generation for `digest_id`.
    pub fn insert(&mut self, digest_id: u32, cfg: DigestConfig) -> P4Result<()> {
        self.check_insert(digest_id, &cfg)?;
        self.configs.insert(digest_id, cfg);
        Ok(())
    }

    pub fn check_insert(&self, digest_id: u32, cfg: &DigestConfig) -> P4Result<()> {
        cfg.validate()?;
        if self.configs.contains_key(&digest_id) {
            return Err(P4Error::new(
                tonic::Code::AlreadyExists,
                format!("digest {digest_id} is already enabled; use MODIFY to change its config"),
            ));
        }
        Ok(())
    }

    /// DigestEntry MODIFY: new parameters for an enabled digest.
    pub fn modify(&mut self, digest_id: u32, cfg: DigestConfig) -> P4Result<()> {
        self.check_modify(digest_id, &cfg)?;
        self.configs.insert(digest_id, cfg);
        Ok(())
    }

    pub fn check_modify(&self, digest_id: u32, cfg: &DigestConfig) -> P4Result<()> {
        cfg.validate()?;
        self.check_enabled(digest_id)
    }

    /// DigestEntry DELETE: stop generating lists; buffered and cached messages are dropped.
    pub fn delete(&mut self, digest_id: u32) -> P4Result<()> {
        self.check_enabled(digest_id)?;
        self.configs.remove(&digest_id);
        self.buffers.remove(&digest_id);
        let gone: Vec<(u32, u64)> = self.sent.keys().filter(|k| k.0 == digest_id).copied().collect();
        for k in gone {
            self.forget(k);
        }
        Ok(())
    }

    pub fn check_enabled(&self, digest_id: u32) -> P4Result<()> {
        if !self.configs.contains_key(&digest_id) {
            return Err(P4Error::not_found(format!("digest {digest_id} is not enabled (INSERT a DigestEntry first)")));
        }
        Ok(())
    }

    /// A copy holding only the configs, to try a batch of config updates on.
    pub fn clone_configs(&self) -> DigestEngine {
        DigestEngine { configs: self.configs.clone(), next_list_id: self.next_list_id, ..Default::default() }
    }

    /// Apply one DigestEntry update (`config` is required for INSERT and MODIFY).
    pub fn apply_config(&mut self, kind: UpdateKind, digest_id: u32, config: Option<DigestConfig>) -> P4Result<()> {
        let need = || P4Error::invalid(format!("digest {digest_id}: config is required"));
        match kind {
            UpdateKind::Insert => self.insert(digest_id, config.ok_or_else(need)?),
            UpdateKind::Modify => self.modify(digest_id, config.ok_or_else(need)?),
            UpdateKind::Delete => self.delete(digest_id),
        }
    }

    /// A digest message from the data plane. Returns a list when one is complete.
    pub fn on_message(&mut self, digest_id: u32, fields: Vec<u128>, now: Instant) -> Option<OutList> {
        let cfg = self.configs.get(&digest_id).copied()?;
        if self.cached.contains(&(digest_id, fields.clone())) {
            return None;
        }
        let buf = self.buffers.entry(digest_id).or_insert_with(|| Buffer {
            items: Vec::new(),
            set: HashSet::new(),
            first: now,
        });
        if buf.items.is_empty() {
            buf.first = now;
        }
        if !buf.set.insert(fields.clone()) {
            return None;
        }
        buf.items.push(fields);
        if buf.items.len() >= cfg.list_cap() {
            return self.flush(digest_id, now);
        }
        None
    }

    /// DigestListAck: the client has the list; its messages may be reported again.
    pub fn on_ack(&mut self, digest_id: u32, list_id: u64) {
        self.forget((digest_id, list_id));
    }

    /// Lists whose `max_timeout_ns` has passed, and expiry of unacknowledged lists.
    pub fn on_tick(&mut self, now: Instant) -> Vec<OutList> {
        let due: Vec<u32> = self
            .buffers
            .iter()
            .filter(|(id, b)| {
                !b.items.is_empty() && self.configs.get(id).is_some_and(|c| now >= b.first + ns(c.max_timeout_ns))
            })
            .map(|(&id, _)| id)
            .collect();
        let out = due.into_iter().filter_map(|id| self.flush(id, now)).collect();
        let expired: Vec<(u32, u64)> = self
            .sent
            .iter()
            .filter(|((id, _), s)| self.configs.get(id).is_none_or(|c| now >= s.at + ns(c.ack_timeout_ns)))
            .map(|(&k, _)| k)
            .collect();
        for k in expired {
            self.forget(k);
        }
        out
    }

    /// When `on_tick` next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let buffers = self
            .buffers
            .iter()
            .filter(|(_, b)| !b.items.is_empty())
            .filter_map(|(id, b)| self.configs.get(id).map(|c| b.first + ns(c.max_timeout_ns)));
        let acks =
            self.sent.iter().filter_map(|((id, _), s)| self.configs.get(id).map(|c| s.at + ns(c.ack_timeout_ns)));
        buffers.chain(acks).min()
    }

    /// Drop buffered and cached messages (the spec allows this on a change of primary).
    pub fn clear_transient(&mut self) {
        self.buffers.clear();
        self.sent.clear();
        self.cached.clear();
    }

    /// Forget everything, configs included (the forwarding state was cleared).
    pub fn reset(&mut self) {
        self.clear_transient();
        self.configs.clear();
    }

    fn flush(&mut self, digest_id: u32, now: Instant) -> Option<OutList> {
        let cfg = self.configs.get(&digest_id).copied()?;
        let buf = self.buffers.get_mut(&digest_id)?;
        if buf.items.is_empty() {
            return None;
        }
        let items = std::mem::take(&mut buf.items);
        buf.set.clear();
        let list_id = self.next_list_id;
        self.next_list_id += 1;
        if cfg.ack_timeout_ns > 0 && self.cached.len() + items.len() <= CACHE_CAP {
            for m in &items {
                self.cached.insert((digest_id, m.clone()));
            }
            self.sent.insert((digest_id, list_id), Sent { items: items.clone(), at: now });
        }
        Some(OutList { digest_id, list_id, data: items })
    }

    fn forget(&mut self, key: (u32, u64)) {
        if let Some(s) = self.sent.remove(&key) {
            for m in s.items {
                self.cached.remove(&(key.0, m));
            }
        }
    }
}

fn ns(v: i64) -> Duration {
    Duration::from_nanos(v.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    const ID: u32 = 0x1700_0001;

    fn cfg(timeout_ms: i64, size: i32, ack_ms: i64) -> DigestConfig {
        DigestConfig { max_timeout_ns: timeout_ms * 1_000_000, max_list_size: size, ack_timeout_ns: ack_ms * 1_000_000 }
    }

    #[test]
    fn nothing_is_sent_unless_enabled() {
        let mut e = DigestEngine::new();
        assert_eq!(e.on_message(ID, vec![1, 2], Instant::now()), None);
        assert_eq!(e.next_deadline(), None);
    }

    #[test]
    fn list_is_cut_at_max_list_size_with_distinct_messages() {
        let mut e = DigestEngine::new();
        e.insert(ID, cfg(1000, 3, 0)).unwrap();
        let t = Instant::now();
        assert_eq!(e.on_message(ID, vec![1, 1], t), None);
        assert_eq!(e.on_message(ID, vec![1, 1], t), None); // duplicate in buffer
        assert_eq!(e.on_message(ID, vec![2, 1], t), None);
        let l = e.on_message(ID, vec![3, 1], t).unwrap();
        assert_eq!(l.data, vec![vec![1, 1], vec![2, 1], vec![3, 1]]);
        assert_eq!(l.digest_id, ID);
        // Without ack timeout nothing is cached: the same message starts a new list.
        assert_eq!(e.on_message(ID, vec![1, 1], t), None);
        assert!(e.next_deadline().is_some());
    }

    #[test]
    fn timeout_flushes_a_partial_list() {
        let mut e = DigestEngine::new();
        e.insert(ID, cfg(10, 100, 0)).unwrap();
        let t = Instant::now();
        e.on_message(ID, vec![7], t);
        assert_eq!(e.next_deadline(), Some(t + Duration::from_millis(10)));
        assert!(e.on_tick(t + Duration::from_millis(9)).is_empty());
        let out = e.on_tick(t + Duration::from_millis(10));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data, vec![vec![7]]);
        assert_eq!(e.next_deadline(), None);
    }

    #[test]
    fn zero_timeout_or_size_one_sends_each_message() {
        let mut e = DigestEngine::new();
        e.insert(ID, cfg(0, 100, 0)).unwrap();
        assert!(e.on_message(ID, vec![1], Instant::now()).is_some());
        e.modify(ID, cfg(1000, 1, 0)).unwrap();
        assert!(e.on_message(ID, vec![2], Instant::now()).is_some());
    }

    #[test]
    fn cache_suppresses_until_ack_or_ack_timeout() {
        let mut e = DigestEngine::new();
        e.insert(ID, cfg(0, 1, 50)).unwrap();
        let t = Instant::now();
        let l1 = e.on_message(ID, vec![9], t).unwrap();
        assert_eq!(e.on_message(ID, vec![9], t), None, "cached message must not be re-sent");
        e.on_ack(ID, l1.list_id);
        let l2 = e.on_message(ID, vec![9], t).unwrap();
        assert!(l2.list_id > l1.list_id);
        assert_eq!(e.on_message(ID, vec![9], t), None);
        assert_eq!(e.next_deadline(), Some(t + Duration::from_millis(50)));
        e.on_tick(t + Duration::from_millis(50));
        assert!(e.on_message(ID, vec![9], t + Duration::from_millis(51)).is_some());
    }

    #[test]
    fn config_updates_follow_insert_modify_delete_rules() {
        let mut e = DigestEngine::new();
        assert_eq!(e.modify(ID, cfg(1, 1, 1)).unwrap_err().code, Code::NotFound);
        assert_eq!(e.delete(ID).unwrap_err().code, Code::NotFound);
        e.insert(ID, cfg(1, 1, 1)).unwrap();
        assert_eq!(e.insert(ID, cfg(1, 1, 1)).unwrap_err().code, Code::AlreadyExists);
        assert_eq!(e.modify(ID, cfg(-1, 1, 1)).unwrap_err().code, Code::InvalidArgument);
        e.modify(ID, cfg(2, 2, 2)).unwrap();
        assert_eq!(e.config(ID), Some(cfg(2, 2, 2)));
        e.delete(ID).unwrap();
        assert_eq!(e.config(ID), None);
    }
}
