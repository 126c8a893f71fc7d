//! Exact-match tables: `port_map` (direct array indexed by the 9-bit port) and the MAC tables.
use super::hash::FxHashMap;
use super::Forward;

/// `port_map`: 512 slots, one per 9-bit ingress port; `None` = miss (default action).
pub struct PortMap {
    slots: Box<[Option<Forward>]>,
}

impl PortMap {
    pub const SLOTS: usize = 512;

    pub fn new(entries: impl IntoIterator<Item = (u16, Forward)>) -> Self {
        let mut slots = vec![None; Self::SLOTS].into_boxed_slice();
        for (port, fwd) in entries {
            slots[port as usize & (Self::SLOTS - 1)] = Some(fwd);
        }
        PortMap { slots }
    }

    #[inline]
    pub fn get(&self, port: u16) -> Option<Forward> {
        self.slots.get(port as usize).copied().flatten()
    }
}

/// A table keyed by a 48-bit MAC address (in the low bits of a u64).
pub struct MacMap<V> {
    map: FxHashMap<u64, V>,
}

impl<V: Copy> MacMap<V> {
    pub fn new(entries: impl IntoIterator<Item = (u64, V)>) -> Self {
        MacMap { map: entries.into_iter().collect() }
    }

    #[inline]
    pub fn get(&self, mac: u64) -> Option<V> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(&mac).copied()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
