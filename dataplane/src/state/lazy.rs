//! Large zero-initialised arrays that cost nothing until used: an anonymous private mapping, whose
//! pages the kernel supplies zero-filled on first access. The per-UE radio state of a million UEs
//! (tens to hundreds of MB) therefore neither slows the start nor takes memory for UEs never seen.
//!
//! (`alloc_zeroed` is lazy only for small alignments: for a 64-byte aligned element type std
//! allocates and then writes zeros over everything, touching every page.)
use std::ops::Deref;

use crate::mapping::{Mapping, Pages};

/// Types for which all-zero bytes are a valid value (integer atomics and structs of them).
///
/// # Safety
/// Implement only for types whose all-zero bit pattern is a valid value.
pub unsafe trait ZeroValid: Sized {}

// SAFETY: atomics of integers have the in-memory representation of their integer; 0 is valid.
unsafe impl ZeroValid for std::sync::atomic::AtomicU8 {}
// SAFETY: as above.
unsafe impl ZeroValid for std::sync::atomic::AtomicU16 {}
// SAFETY: as above.
unsafe impl ZeroValid for std::sync::atomic::AtomicU32 {}
// SAFETY: as above.
unsafe impl ZeroValid for std::sync::atomic::AtomicU64 {}

pub struct LazyArray<T: ZeroValid> {
    /// The first element: in `_map`, or dangling for an empty array.
    ptr: *const T,
    len: usize,
    /// Owns the elements' memory (None: nothing to map).
    _map: Option<Mapping>,
}

// SAFETY: the elements are atomics (ZeroValid types used here are Sync); the mapping is owned.
unsafe impl<T: ZeroValid + Sync> Send for LazyArray<T> {}
// SAFETY: as above: shared access goes through the elements' own atomic operations.
unsafe impl<T: ZeroValid + Sync> Sync for LazyArray<T> {}

impl<T: ZeroValid> LazyArray<T> {
    /// `len` zeroed elements. With `huge_pages`, transparent huge pages are asked for (fewer TLB
    /// misses when a packet touches a random UE's state; 2 MiB committed per region first used).
    pub fn new(len: usize, huge_pages: bool) -> Self {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("array size overflows");
        if bytes == 0 {
            return LazyArray { ptr: std::ptr::NonNull::dangling().as_ptr(), len, _map: None };
        }
        assert!(std::mem::align_of::<T>() <= 4096, "page alignment suffices for every element type");
        let map = Mapping::zeroed(bytes, Pages::OnFirstTouch)
            .unwrap_or_else(|e| panic!("mmap of {bytes} bytes for a zeroed array failed: {e}"));
        if huge_pages {
            map.advise_huge_pages();
        }
        LazyArray { ptr: map.as_ptr() as *const T, len, _map: Some(map) }
    }
}

impl<T: ZeroValid> Deref for LazyArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr is valid for len elements while `_map` lives (page-aligned mapping, zero
        // bytes are valid T), or dangling with no bytes to read.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}
