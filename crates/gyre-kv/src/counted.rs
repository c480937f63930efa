//! [`CountedBytes`]: the storage of the small aggregates' listpacks — the
//! entries' bytes followed (when there are any) by their count as a `u32`
//! LE, in one exact-size allocation behind a 16-byte handle. Sixteen bytes
//! is what lets a small hash or sorted set live in the keyspace node's
//! value slot with no box of its own (see [`crate::object`]); exact size
//! is Redis's listpack habit (a realloc per insert, no doubling slack).

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CountedBytes {
    buf: Box<[u8]>,
}

/// Bytes of the trailing count.
const COUNT: usize = 4;

impl CountedBytes {
    /// The entries' bytes (without the count).
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.buf.len().saturating_sub(COUNT)]
    }

    /// The entries' bytes, writable in place (same length).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let n = self.buf.len().saturating_sub(COUNT);
        &mut self.buf[..n]
    }

    /// Number of entries.
    #[inline]
    pub fn count(&self) -> u32 {
        let n = self.buf.len();
        match self.buf.get(n.saturating_sub(COUNT)..) {
            Some(c) if n >= COUNT => {
                let mut le = [0u8; COUNT];
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
    /// exactly) and their count, then store them back at their exact size
    /// (no allocation at all once the count is 0).
    pub fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>, &mut u32) -> R) -> R {
        let mut count = self.count();
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.truncate(v.len().saturating_sub(COUNT));
        v.reserve_exact(extra + COUNT);
        let r = f(&mut v, &mut count);
        if count > 0 {
            v.extend_from_slice(&count.to_le_bytes());
            self.buf = v.into_boxed_slice();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_trails_the_entries_and_empty_allocates_nothing() {
        let mut c = CountedBytes::default();
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
