//! Preallocated packet buffers for packets that wait (delay line, tx backlog).
//!
//! One slab of `count * size` bytes plus a free stack of handles, both allocated at start and
//! owned by the data-plane thread alone: alloc and free are a push/pop, with no lock and no heap
//! call. The slab is zero-initialised memory from the allocator (calloc), so pages are only
//! touched when a buffer is first used. An empty pool means drop reason `buffer_exhausted`.

pub type Handle = u32;
pub const NIL: Handle = u32::MAX;

/// Where a held packet goes and whom it is counted against.
#[derive(Debug, Clone, Copy, Default)]
pub struct PktMeta {
    pub len: u32,
    /// Index of the egress port in the data plane's port list, or [`OUT_CPU`].
    pub out: u16,
    pub in_port: u16,
    /// Profile-direction index, or [`NO_PD`] for PacketOut frames (not counted).
    pub pd: u32,
}

pub const OUT_CPU: u16 = u16::MAX;
pub const NO_PD: u32 = u32::MAX;

pub struct Pool {
    slab: Vec<u8>,
    size: usize,
    free: Vec<Handle>,
    meta: Vec<PktMeta>,
}

impl Pool {
    pub fn new(count: usize, size: usize) -> Self {
        assert!(count < NIL as usize, "too many buffers");
        Pool {
            slab: vec![0u8; count * size],
            size,
            // Pop order low handles first: nicer locality when the pool is lightly used.
            free: (0..count as Handle).rev().collect(),
            meta: vec![PktMeta::default(); count],
        }
    }

    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    pub fn buffer_size(&self) -> usize {
        self.size
    }

    pub fn available(&self) -> usize {
        self.free.len()
    }

    #[inline]
    pub fn alloc(&mut self) -> Option<Handle> {
        self.free.pop()
    }

    #[inline]
    pub fn free(&mut self, h: Handle) {
        debug_assert!(self.free.len() < self.meta.len());
        self.free.push(h);
    }

    /// Copies `frame` into buffer `h` (truncating at the buffer size) and sets its metadata.
    #[inline]
    pub fn fill(&mut self, h: Handle, frame: &[u8], meta: PktMeta) {
        let n = frame.len().min(self.size);
        let at = h as usize * self.size;
        self.slab[at..at + n].copy_from_slice(&frame[..n]);
        self.meta[h as usize] = PktMeta { len: n as u32, ..meta };
    }

    #[inline]
    pub fn meta(&self, h: Handle) -> PktMeta {
        self.meta[h as usize]
    }

    #[inline]
    pub fn frame(&self, h: Handle) -> &[u8] {
        let at = h as usize * self.size;
        &self.slab[at..at + self.meta[h as usize].len as usize]
    }

    #[inline]
    pub fn frame_mut(&mut self, h: Handle) -> &mut [u8] {
        let at = h as usize * self.size;
        let len = self.meta[h as usize].len as usize;
        &mut self.slab[at..at + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_until_empty_then_reuse() {
        let mut p = Pool::new(3, 64);
        let hs: Vec<Handle> = (0..3).map(|_| p.alloc().unwrap()).collect();
        assert_eq!(p.alloc(), None);
        p.fill(hs[1], &[1, 2, 3], PktMeta { pd: 7, ..Default::default() });
        assert_eq!(p.frame(hs[1]), &[1, 2, 3]);
        assert_eq!(p.meta(hs[1]).pd, 7);
        p.fill(hs[0], &[9u8; 100], PktMeta::default());
        assert_eq!(p.frame(hs[0]).len(), 64);
        p.free(hs[2]);
        assert_eq!(p.alloc(), Some(hs[2]));
    }
}
