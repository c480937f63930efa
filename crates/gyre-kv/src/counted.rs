//! [`CountedBytes`]: the storage of the small aggregates' listpacks — the
//! entries' bytes followed (when there are any, and `COUNTED`) by their
//! count as a `u32` LE, in one exact-size allocation behind a 16-byte
//! handle. Sixteen bytes is what lets a small hash or sorted set live in
//! the keyspace node's value slot with no box of its own (see
//! [`crate::object`]); exact size is Redis's listpack habit (a realloc per
//! insert, no doubling slack).
//!
//! Small hashes and sorted sets store no count (`COUNTED = false`): their
//! length is a walk of at most `*-max-listpack-entries` entries, and four
//! bytes are what puts a hash of ten short fields (120 bytes of entries)
//! in glibc's 128-byte chunk instead of its 144-byte one. Quicklist nodes
//! keep theirs (a list's length and fill checks read it per push).

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CountedBytes<const COUNTED: bool = true> {
    buf: Box<[u8]>,
}

impl<const COUNTED: bool> CountedBytes<COUNTED> {
    /// Bytes of the trailing count.
    const COUNT: usize = if COUNTED { 4 } else { 0 };

    /// The entries' bytes (without the count).
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.buf.len().saturating_sub(Self::COUNT)]
    }

    /// The entries' bytes, writable in place (same length).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let n = self.buf.len().saturating_sub(Self::COUNT);
        &mut self.buf[..n]
    }

    /// Number of entries (0 when not `COUNTED`).
    #[inline]
    pub fn count(&self) -> u32 {
        let n = self.buf.len();
        match self.buf.get(n.saturating_sub(Self::COUNT)..) {
            Some(c) if COUNTED && n >= Self::COUNT => {
                let mut le = [0u8; 4];
                le.copy_from_slice(c);
                u32::from_le_bytes(le)
            }
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes allocated.
    pub fn allocated(&self) -> usize {
        self.buf.len()
    }

    /// Change the entries as a `Vec` (room for `extra` more bytes reserved
    /// exactly) and their count (ignored when not `COUNTED`), then store
    /// them back at their exact size (no allocation at all once there are
    /// no entries).
    pub fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>, &mut u32) -> R) -> R {
        // Uncounted: a dummy midpoint, so the callers' increments and
        // decrements never overflow; it is dropped afterwards.
        let mut count = if COUNTED { self.count() } else { u32::MAX / 2 };
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.truncate(v.len().saturating_sub(Self::COUNT));
        v.reserve_exact(extra + Self::COUNT);
        let r = f(&mut v, &mut count);
        if COUNTED && count > 0 {
            v.extend_from_slice(&count.to_le_bytes());
            self.buf = v.into_boxed_slice();
        } else if !COUNTED && !v.is_empty() {
            self.buf = v.into_boxed_slice();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncounted_bytes_are_the_entries_alone() {
        let mut c = CountedBytes::<false>::default();
        c.edit(3, |v, _| v.extend_from_slice(b"abc"));
        assert_eq!((c.data(), c.allocated()), (&b"abc"[..], 3));
        c.edit(0, |v, _| v.clear());
        assert!(c.is_empty() && c.allocated() == 0);
    }

    #[test]
    fn count_trails_the_entries_and_empty_allocates_nothing() {
        let mut c = CountedBytes::<true>::default();
        assert_eq!((c.count(), c.data(), c.allocated()), (0, &b""[..], 0));
        c.edit(3, |v, n| {
            v.extend_from_slice(b"abc");
            *n = 2;
        });
        assert_eq!((c.count(), c.data(), c.allocated()), (2, &b"abc"[..], 7));
        c.data_mut()[0] = b'x';
        c.edit(0, |v, n| {
            v.truncate(1);
            *n -= 1;
        });
        assert_eq!((c.count(), c.data(), c.allocated()), (1, &b"x"[..], 5));
        c.edit(0, |v, n| {
            v.clear();
            *n = 0;
        });
        assert!(c.is_empty() && c.allocated() == 0);
    }
}
