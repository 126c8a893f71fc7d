//! An owned memory mapping: the one place the switch calls `mmap` and `munmap`.
//!
//! The switch maps memory of four kinds: lazily zeroed arrays (per-UE radio state), an AF_XDP UMEM,
//! and memory the kernel shares through a descriptor (AF_PACKET and AF_XDP rings, BPF array maps).
//! Each owner used to pair its own `mmap` with an `munmap` in its `Drop` and, where setup could
//! fail halfway, in its error paths; a `Mapping` unmaps itself, so an early return cannot leak it
//! and a struct's field order says when it goes.
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// `len` bytes mapped at `ptr`, unmapped on drop. It hands out only a raw pointer: what the bytes
/// hold, and who may touch them when, is the owner's invariant to state.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is process-wide, not tied to the thread that made it; the struct gives no safe
// access to the bytes, so sharing or moving it cannot race on them by itself.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// When the pages of a mapping are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// At first touch, with no swap reserved (MAP_NORESERVE): a large array costs nothing until used.
    OnFirstTouch,
    /// All now (MAP_POPULATE): memory the fast path touches from its first packet takes no page
    /// faults there.
    Now,
}

impl Mapping {
    /// `len` zeroed bytes of private anonymous memory.
    pub fn zeroed(len: usize, pages: Pages) -> io::Result<Mapping> {
        let extra = match pages {
            Pages::OnFirstTouch => libc::MAP_NORESERVE,
            Pages::Now => libc::MAP_POPULATE,
        };
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra, -1, 0)
    }

    /// `len` bytes of what `fd` shares with the kernel, from byte `offset` (a ring of a socket, a
    /// BPF map's values), populated now.
    pub fn shared(fd: RawFd, len: usize, offset: u64) -> io::Result<Mapping> {
        Self::map(len, libc::MAP_SHARED | libc::MAP_POPULATE, fd, offset)
    }

    fn map(len: usize, flags: libc::c_int, fd: RawFd, offset: u64) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a mapping of 0 bytes"));
        }
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mapping offset out of range"))?;
        // SAFETY: a fresh mapping chosen by the kernel (no address hint), so it cannot overlap
        // memory anything else owns; failure is checked below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p as *mut u8).expect("mmap returned a null mapping");
        Ok(Mapping { ptr, len })
    }

    /// Asks for transparent huge pages (fewer TLB misses on random access); failing, small pages
    /// stay, which is only slower.
    pub fn advise_huge_pages(&self) {
        // SAFETY: advice on our own mapping.
        unsafe { libc::madvise(self.ptr.as_ptr() as *mut libc::c_void, self.len, libc::MADV_HUGEPAGE) };
    }

    /// The first byte (page-aligned).
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping has at least one byte (`map` refuses 0).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range mapped in `map`; the owner's pointers into it end with
        // the owner, which holds this value.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_memory_reads_zero_and_is_writable() {
        for pages in [Pages::OnFirstTouch, Pages::Now] {
            let m = Mapping::zeroed(3 * 4096 + 1, pages).unwrap();
            assert_eq!(m.as_ptr() as usize % 4096, 0);
            // SAFETY: the mapping is len bytes of private memory owned by this test.
            let bytes = unsafe { std::slice::from_raw_parts_mut(m.as_ptr(), m.len()) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[m.len() - 1] = 7;
            assert_eq!(bytes[m.len() - 1], 7);
        }
    }

    #[test]
    fn nothing_to_map_is_an_error_not_a_panic() {
        assert_eq!(Mapping::zeroed(0, Pages::Now).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        // A descriptor that is not open: the kernel's own error comes back.
        assert_eq!(Mapping::shared(-1, 4096, 0).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}
