//! Shared anonymous memory: the pages the master maps before forking so that
//! every worker sees the same bytes (nginx's `ngx_shm_alloc` with
//! `MAP_ANON|MAP_SHARED`).
//!
//! This module owns the mapping ([`ShmRegion`]), its lifetime (unmapped on
//! drop, per process), and the single rule that makes typed access to it safe:
//! only [`ShmSafe`] types — plain `#[repr(C)]` aggregates of integer atomics —
//! may be viewed in it. What lives *in* the zone (accept mutex, counters) is
//! decided one layer up, in `process::shm`.
//!
//! Why atomics only: after `fork` the same physical pages are written by
//! several processes at once. Rust's aliasing rules can only be honoured if
//! every access is atomic, and only integer atomics are valid for every bit
//! pattern another process (or a buggy one) might leave behind. Pointers are
//! excluded too: they would be meaningless in a process that mapped the region
//! elsewhere.

use std::io;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};

use rustix::mm::{MapFlags, ProtFlags};

/// Types that may be viewed inside a shared mapping.
///
/// # Safety
///
/// Implement this only for types where all of the following hold:
///
/// - every bit pattern of `size_of::<Self>()` bytes is a valid value (so the
///   all-zero pages of a fresh mapping, and whatever another process wrote,
///   are valid) — hence integer atomics, never `AtomicBool` or enums;
/// - all mutation goes through atomic operations on `&Self` (no `Cell`, no
///   plain fields that are written, no `&mut` access is ever needed);
/// - it holds no pointers or references (they would not be meaningful in
///   other processes) and needs no `Drop` (the value is never dropped);
/// - its layout is fixed (`#[repr(C)]` or `#[repr(transparent)]`), so every
///   process built from the same binary agrees on it.
pub unsafe trait ShmSafe: Sync {}

macro_rules! shm_safe_atomics {
    ($($t:ty),*) => {$(
        // SAFETY: integer atomics are valid for every bit pattern, are mutated
        // only through atomic operations, hold no pointers and have no Drop.
        unsafe impl ShmSafe for $t {}
    )*};
}

shm_safe_atomics!(
    AtomicU8,
    AtomicU16,
    AtomicU32,
    AtomicU64,
    AtomicUsize,
    AtomicI8,
    AtomicI16,
    AtomicI32,
    AtomicI64,
    AtomicIsize
);

// SAFETY: an array of ShmSafe elements has no padding between them and every
// element individually satisfies the contract, so the array does too.
unsafe impl<T: ShmSafe, const N: usize> ShmSafe for [T; N] {}

/// The system page size, used to round mappings (it is not always 4 KiB:
/// arm64 kernels use 16 or 64 KiB pages).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// A `MAP_SHARED | MAP_ANONYMOUS` mapping, zero-filled, page-rounded.
///
/// Created in the master before `fork`; each child inherits the mapping at the
/// same address, so all of them share the pages. Dropping it unmaps it in the
/// current process only; other processes keep their mapping.
#[derive(Debug)]
pub struct ShmRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is only ever accessed through `&T` where `T: ShmSafe`,
// i.e. through atomics, so sharing or moving the handle between threads is as
// safe as sharing those atomics.
unsafe impl Send for ShmRegion {}
// SAFETY: see the `Send` impl; `ShmRegion` exposes no non-atomic access.
unsafe impl Sync for ShmRegion {}

impl ShmRegion {
    /// Maps `size` bytes (rounded up to whole pages; at least one page) of
    /// shared, zero-filled memory.
    pub fn new(size: usize) -> io::Result<ShmRegion> {
        let page = page_size();
        let len = size
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let ptr = map_shared_anon(len)?;
        Ok(ShmRegion { ptr, len })
    }

    /// The mapped length in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region is at least one page. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the mapping (page-aligned); for diagnostics and tests.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The whole region as 64-bit atomic words: for variable-sized tables
    /// (the TLS session cache) laid out by the layer above.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is `len` bytes, page-aligned (so aligned for
        // AtomicU64), lives as long as `&self`; AtomicU64 is ShmSafe (valid
        // for every bit pattern, mutated only atomically), and `len / 8`
        // words fit in it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }

    /// Views the start of the region as a `T`.
    ///
    /// Returns `None` when `T` does not fit or needs more than page alignment.
    /// The region is zero-filled and `T: ShmSafe` is valid for any bytes, so
    /// no initialisation is needed; every process that calls this on the same
    /// region must use the same `T` (one region, one layout).
    pub fn zone<T: ShmSafe>(&self) -> Option<&T> {
        if size_of::<T>() > self.len || align_of::<T>() > page_size() {
            return None;
        }
        // SAFETY: the mapping is `len >= size_of::<T>()` bytes, page-aligned
        // (so aligned for T), lives as long as `&self`, and `T: ShmSafe` is
        // valid for every bit pattern and only mutated through atomics.
        Some(unsafe { &*self.ptr.as_ptr().cast::<T>() })
    }
}

impl ShmRegion {
    /// Views the start of the region as `n` values of `T`: a zone whose size
    /// is known only at run time (one slot per upstream peer).
    ///
    /// Returns `None` when they do not fit or `T` needs more than page
    /// alignment; as for [`ShmRegion::zone`], every process must use the
    /// same `T` and `n` on one region.
    pub fn slice<T: ShmSafe>(&self, n: usize) -> Option<&[T]> {
        let bytes = size_of::<T>().checked_mul(n)?;
        if bytes > self.len || align_of::<T>() > page_size() {
            return None;
        }
        // SAFETY: the mapping is `len >= n * size_of::<T>()` bytes,
        // page-aligned (so aligned for T), lives as long as `&self`, and
        // `T: ShmSafe` is valid for every bit pattern and only mutated
        // through atomics; arrays of ShmSafe values have no padding between
        // elements.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<T>(), n) })
    }
}

impl Drop for ShmRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created and still own; no
        // references into it outlive `self` because `zone` borrows `self`.
        let r = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
        if let Err(e) = r {
            log::error!("munmap({:p}, {}) failed: {}", self.ptr, self.len, e);
        }
    }
}

/// `mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS, -1, 0)`.
fn map_shared_anon(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a NULL hint lets the kernel choose fresh addresses, so no
    // existing Rust object is affected by the new mapping.
    let p = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
        )
    }?;
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))
}

/// A shared region holding exactly one `T`: the typed form of [`ShmRegion`]
/// the layer above uses, so the size check happens once, at creation.
#[derive(Debug)]
pub struct Shm<T: ShmSafe> {
    region: ShmRegion,
    _layout: PhantomData<T>,
}

impl<T: ShmSafe> Shm<T> {
    /// Maps a fresh zeroed region big enough for `T`.
    pub fn new() -> io::Result<Shm<T>> {
        if align_of::<T>() > page_size() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let region = ShmRegion::new(size_of::<T>())?;
        Ok(Shm {
            region,
            _layout: PhantomData,
        })
    }

    /// The underlying mapping.
    pub fn region(&self) -> &ShmRegion {
        &self.region
    }
}

impl<T: ShmSafe> Deref for Shm<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: `new` mapped at least `size_of::<T>()` page-aligned bytes and
        // checked `align_of::<T>() <= page_size()`; `T: ShmSafe` is valid for
        // any bytes, and the reference borrows `self`, which owns the mapping.
        unsafe { &*self.region.ptr.as_ptr().cast::<T>() }
    }
}
