//! Preallocated packet buffers for packets that wait (delay line, tx backlog).
//!
//! One slab of `count * size` bytes plus a free stack of handles, both allocated at start and
//! owned by the data-plane thread alone: alloc and free are a push/pop, with no lock and no heap
//! call. The slab is zero-initialised memory from the allocator (calloc), so pages are only
//! touched when a buffer is first used. An empty pool means drop reason `buffer_exhausted`.
//! A port whose MTU is raised above what the buffers hold adds a class of larger ones
//! ([`Class`], allocated off the data-plane thread, dataplane/port_lifecycle.rs `resize_for_mtu`):
//! frames that fit a base buffer still take one, only longer ones a larger buffer. A class no
//! port's MTU needs any more (lowered since) is taken out again once none of its buffers holds a
//! packet ([`Pool::take_unneeded`]), and freed off the data-plane thread too.

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
    /// Larger buffers added while the switch runs, for a port whose MTU was raised above what
    /// `size` holds (dataplane/port_lifecycle.rs `resize_for_mtu`), in the order added (each larger than the one
    /// before). Their handles follow the base buffers' (`Class::first`), in ascending ranges; a
    /// class taken out leaves a gap no handle is in (the others keep theirs).
    classes: Vec<Class>,
}

/// A set of buffers of one (larger) size, allocated off the data-plane thread (`Class::new`) and
/// added to the pool (`Pool::add_class`). Allocated zeroed (calloc): pages are only touched when
/// a buffer is first used, so a class costs address space, not memory, until jumbo frames wait.
pub struct Class {
    /// Handle of its first buffer (set when added to a pool).
    first: Handle,
    size: usize,
    slab: Vec<u8>,
    /// Free buffers, as indexes into this class.
    free: Vec<Handle>,
    meta: Vec<PktMeta>,
}

impl Class {
    pub fn new(count: usize, size: usize) -> Class {
        Class {
            first: 0,
            size,
            slab: vec![0u8; count * size],
            free: (0..count as Handle).rev().collect(),
            meta: vec![PktMeta::default(); count],
        }
    }

    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// How many buffers it has.
    pub fn count(&self) -> usize {
        self.meta.len()
    }
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
            // Room for every class there can be (ring frame sizes 4 KiB..128 KiB), so that adding
            // one never reallocates on the data-plane thread.
            classes: Vec::with_capacity(8),
        }
    }

    /// (count, size) of the buffers given at start.
    pub fn base(&self) -> (usize, usize) {
        (self.meta.len(), self.size)
    }

    /// Every buffer, of every size.
    pub fn capacity(&self) -> usize {
        self.meta.len() + self.classes.iter().map(|c| c.meta.len()).sum::<usize>()
    }

    /// The largest frame a buffer holds.
    pub fn buffer_size(&self) -> usize {
        self.classes.last().map_or(self.size, |c| c.size)
    }

    pub fn available(&self) -> usize {
        self.free.len() + self.classes.iter().map(|c| c.free.len()).sum::<usize>()
    }

    /// One more than the largest handle there can be now: what structures indexed by handle (the
    /// delay line's wheels, the cells' bearers) must have room for.
    pub fn handles(&self) -> usize {
        self.classes.last().map_or(self.meta.len(), |c| c.first as usize + c.meta.len())
    }

    /// The larger classes there are now.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    /// Adds `class`, whose buffers are larger than any so far (else it is not needed and is
    /// handed back, to be freed off this thread). No allocation: `classes` has its room.
    pub fn add_class(&mut self, mut class: Class) -> Option<Class> {
        // After the last handle given out (not `capacity`: a class taken out leaves a gap).
        let end = self.handles();
        if class.size <= self.buffer_size()
            || self.classes.len() == self.classes.capacity()
            || end + class.meta.len() >= NIL as usize
        {
            return Some(class);
        }
        class.first = end as Handle;
        self.classes.push(class);
        None
    }

    /// Takes out the larger classes that no frame of `needs` (each port's longest frame, with a
    /// tag) would be given first, and whose buffers are all free: a packet in one (waiting in a
    /// delay or rate queue, a bearer, a TX backlog: every held packet is in a buffer) keeps its
    /// class until it leaves. Handed back to be freed off this thread; the classes kept keep
    /// their handles. A frame `alloc_for` is given a buffer of takes the smallest class that holds
    /// it, so a class is needed by a frame longer than the class below it (or the base buffers)
    /// and no longer than itself, or than any (the largest).
    pub fn take_unneeded(&mut self, needs: &[usize]) -> Vec<Class> {
        let mut unneeded = Vec::new();
        for k in (0..self.classes.len()).rev() {
            let below = if k == 0 { self.size } else { self.classes[k - 1].size };
            let c = &self.classes[k];
            let last = k + 1 == self.classes.len();
            let needed = needs.iter().any(|&n| n > below && (n <= c.size || last));
            if !needed && c.free.len() == c.meta.len() {
                unneeded.push(self.classes.remove(k));
            }
        }
        unneeded
    }

    #[inline]
    pub fn alloc(&mut self) -> Option<Handle> {
        self.free.pop()
    }

    /// A buffer that holds `len` bytes: a base one (as `alloc`) when it fits one, else one of the
    /// smallest larger class with a free buffer. None: none free (`buffer_exhausted`).
    #[inline]
    pub fn alloc_for(&mut self, len: usize) -> Option<Handle> {
        if len <= self.size {
            return self.free.pop();
        }
        self.alloc_large(len)
    }

    #[cold]
    fn alloc_large(&mut self, len: usize) -> Option<Handle> {
        let c = self.classes.iter_mut().find(|c| c.size >= len && !c.free.is_empty())?;
        c.free.pop().map(|i| c.first + i)
    }

    #[inline]
    pub fn free(&mut self, h: Handle) {
        if (h as usize) < self.meta.len() {
            debug_assert!(self.free.len() < self.meta.len());
            self.free.push(h);
        } else {
            let c = self.class_mut(h);
            let i = h - c.first;
            c.free.push(i);
        }
    }

    #[cold]
    fn class_mut(&mut self, h: Handle) -> &mut Class {
        let k = self.classes.iter().rposition(|c| h >= c.first).expect("a handle of this pool");
        &mut self.classes[k]
    }

    #[cold]
    fn class(&self, h: Handle) -> &Class {
        let k = self.classes.iter().rposition(|c| h >= c.first).expect("a handle of this pool");
        &self.classes[k]
    }

    /// Buffer `h`'s bytes, size and metadata slot.
    #[inline]
    fn parts_mut(&mut self, h: Handle) -> (&mut [u8], &mut PktMeta) {
        if (h as usize) < self.meta.len() {
            let at = h as usize * self.size;
            (&mut self.slab[at..at + self.size], &mut self.meta[h as usize])
        } else {
            let c = self.class_mut(h);
            let i = (h - c.first) as usize;
            let at = i * c.size;
            (&mut c.slab[at..at + c.size], &mut c.meta[i])
        }
    }

    #[inline]
    fn parts(&self, h: Handle) -> (&[u8], &PktMeta) {
        if (h as usize) < self.meta.len() {
            let at = h as usize * self.size;
            (&self.slab[at..at + self.size], &self.meta[h as usize])
        } else {
            let c = self.class(h);
            let i = (h - c.first) as usize;
            let at = i * c.size;
            (&c.slab[at..at + c.size], &c.meta[i])
        }
    }

    /// Copies `frame` into buffer `h` (truncating at the buffer size) and sets its metadata.
    #[inline]
    pub fn fill(&mut self, h: Handle, frame: &[u8], meta: PktMeta) {
        let (buf, m) = self.parts_mut(h);
        let n = frame.len().min(buf.len());
        buf[..n].copy_from_slice(&frame[..n]);
        *m = PktMeta { len: n as u32, ..meta };
    }

    #[inline]
    pub fn meta(&self, h: Handle) -> PktMeta {
        *self.parts(h).1
    }

    #[inline]
    pub fn frame(&self, h: Handle) -> &[u8] {
        let (buf, m) = self.parts(h);
        &buf[..m.len as usize]
    }

    #[inline]
    pub fn frame_mut(&mut self, h: Handle) -> &mut [u8] {
        let (buf, m) = self.parts_mut(h);
        let len = m.len as usize;
        &mut buf[..len]
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

    #[test]
    fn larger_classes_hold_longer_frames_and_keep_their_own_handles() {
        let mut p = Pool::new(2, 64);
        assert_eq!(p.alloc_for(65), None, "no class yet: no buffer holds it");
        assert!(p.add_class(Class::new(2, 32)).is_some(), "smaller than the base: not added");
        assert!(p.add_class(Class::new(2, 256)).is_none());
        assert!(p.add_class(Class::new(1, 128)).is_some(), "not larger than the last: not added");
        assert!(p.add_class(Class::new(1, 1024)).is_none());
        assert_eq!((p.capacity(), p.available(), p.buffer_size()), (5, 5, 1024));
        let small = p.alloc_for(10).unwrap();
        assert!(small < 2, "short frames take base buffers");
        let a = p.alloc_for(200).unwrap();
        let b = p.alloc_for(256).unwrap();
        let c = p.alloc_for(200).unwrap(); // the 256-byte class is empty: the next one up
        assert_eq!((a.max(b), c), (3, 4));
        assert_eq!(p.alloc_for(300), None);
        let long: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        p.fill(c, &long, PktMeta { pd: 9, ..Default::default() });
        p.fill(a, &long[..200], PktMeta { pd: 8, ..Default::default() });
        p.fill(small, &[7u8; 10], PktMeta::default());
        assert_eq!(p.frame(c), &long[..]);
        assert_eq!((p.meta(c).pd, p.meta(c).len, p.frame(a), p.meta(a).pd), (9, 1000, &long[..200], 8));
        p.frame_mut(c)[0] = 0xff;
        assert_eq!(p.frame(c)[0], 0xff);
        assert_eq!(p.frame(small), &[7u8; 10]);
        for h in [a, b, c, small] {
            p.free(h);
        }
        assert_eq!(p.available(), 5);
        assert_eq!(p.alloc_for(1000), Some(4));
    }

    #[test]
    fn a_class_no_frame_needs_is_taken_out_once_no_packet_is_in_it() {
        let mut p = Pool::new(2, 64);
        // Handles 2, 3 and 4, 5. Frames of up to 200 bytes take the 256-byte class, of 1000 the
        // 1024-byte one.
        assert!(p.add_class(Class::new(2, 256)).is_none());
        assert!(p.add_class(Class::new(2, 1024)).is_none());
        assert!(p.take_unneeded(&[60, 200, 1000]).is_empty());
        // No frame of up to 200 bytes any more: the 256-byte class goes (a 1000-byte frame takes
        // the 1024-byte one).
        let freed = p.take_unneeded(&[60, 1000]);
        assert_eq!(freed.iter().map(Class::buffer_size).collect::<Vec<_>>(), vec![256]);
        assert_eq!((p.classes(), p.capacity(), p.buffer_size()), (1, 4, 1024));
        // The 1024-byte class holds a packet: a port that needs it no more does not free it.
        let held = p.alloc_for(1000).unwrap();
        assert_eq!(held, 4, "the remaining class keeps its handles");
        p.fill(held, &[5u8; 1000], PktMeta { pd: 3, ..Default::default() });
        assert!(p.take_unneeded(&[60]).is_empty(), "a packet is in it");
        assert_eq!((p.frame(held), p.meta(held).pd), (&[5u8; 1000][..], 3));
        p.free(held);
        let freed = p.take_unneeded(&[60]);
        assert_eq!(freed.iter().map(Class::buffer_size).collect::<Vec<_>>(), vec![1024]);
        assert_eq!((p.classes(), p.capacity(), p.available(), p.buffer_size()), (0, 2, 2, 64));
        assert_eq!(p.alloc_for(65), None);
        // Added again later: handles after the last class's (here: after the base buffers').
        assert!(p.add_class(Class::new(1, 512)).is_none());
        assert_eq!(p.alloc_for(500), Some(2));
        // The largest class is needed by any frame longer than the class below it.
        assert!(p.add_class(Class::new(1, 2048)).is_none());
        p.free(2);
        let freed = p.take_unneeded(&[3000]);
        assert_eq!(freed.iter().map(Class::buffer_size).collect::<Vec<_>>(), vec![512]);
        assert_eq!((p.classes(), p.buffer_size(), p.alloc_for(2000)), (1, 2048, Some(3)));
    }
}
