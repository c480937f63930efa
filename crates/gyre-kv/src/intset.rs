//! An intset: a sorted array of distinct integers stored at the narrowest
//! width that holds them all (16, 32 or 64 bits), upgraded when a wider
//! value arrives — Redis's `intset.c` idea. Small sets of integers (the
//! usual "set of ids") cost 2–8 bytes per member. Membership is a binary
//! search; SMEMBERS order is ascending, as Redis's.

/// Each width's members in an exact-size boxed slice (16 bytes and a tag:
/// the set fits in the keyspace node's value slot, see [`crate::object`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntSet {
    I16(Box<[i16]>),
    I32(Box<[i32]>),
    I64(Box<[i64]>),
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::I16(Box::default())
    }
}

/// Change a boxed slice as a `Vec`, then box it back at its exact size.
fn edit<T, R>(b: &mut Box<[T]>, f: impl FnOnce(&mut Vec<T>) -> R) -> R {
    let mut v = std::mem::take(b).into_vec();
    let r = f(&mut v);
    *b = v.into_boxed_slice();
    r
}

impl IntSet {
    pub fn new() -> IntSet {
        IntSet::default()
    }

    pub fn len(&self) -> usize {
        match self {
            IntSet::I16(v) => v.len(),
            IntSet::I32(v) => v.len(),
            IntSet::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes allocated.
    pub fn capacity_bytes(&self) -> usize {
        match self {
            IntSet::I16(v) => v.len() * 2,
            IntSet::I32(v) => v.len() * 4,
            IntSet::I64(v) => v.len() * 8,
        }
    }

    /// Member `i` in ascending order.
    pub fn get(&self, i: usize) -> Option<i64> {
        match self {
            IntSet::I16(v) => v.get(i).map(|&x| i64::from(x)),
            IntSet::I32(v) => v.get(i).map(|&x| i64::from(x)),
            IntSet::I64(v) => v.get(i).copied(),
        }
    }

    pub fn contains(&self, x: i64) -> bool {
        match self {
            IntSet::I16(v) => i16::try_from(x).is_ok_and(|x| v.binary_search(&x).is_ok()),
            IntSet::I32(v) => i32::try_from(x).is_ok_and(|x| v.binary_search(&x).is_ok()),
            IntSet::I64(v) => v.binary_search(&x).is_ok(),
        }
    }

    fn upgrade_for(&mut self, x: i64) {
        let need32 = i16::try_from(x).is_err();
        let need64 = i32::try_from(x).is_err();
        match self {
            IntSet::I16(v) if need64 => *self = IntSet::I64(v.iter().map(|&a| a.into()).collect()),
            IntSet::I16(v) if need32 => *self = IntSet::I32(v.iter().map(|&a| a.into()).collect()),
            IntSet::I32(v) if need64 => *self = IntSet::I64(v.iter().map(|&a| a.into()).collect()),
            _ => {}
        }
    }

    /// Add `x`; false if it was there.
    pub fn insert(&mut self, x: i64) -> bool {
        self.upgrade_for(x);
        fn ins<T: Ord + Copy>(v: &mut Box<[T]>, x: T) -> bool {
            match v.binary_search(&x) {
                Ok(_) => false,
                Err(p) => {
                    // Exact growth, as Redis's intset reallocs per add.
                    edit(v, |v| {
                        v.reserve_exact(1);
                        v.insert(p, x);
                    });
                    true
                }
            }
        }
        match self {
            IntSet::I16(v) => i16::try_from(x).is_ok_and(|x| ins(v, x)),
            IntSet::I32(v) => i32::try_from(x).is_ok_and(|x| ins(v, x)),
            IntSet::I64(v) => ins(v, x),
        }
    }

    /// Remove `x`; false if it was not there.
    pub fn remove(&mut self, x: i64) -> bool {
        fn rm<T: Ord + Copy>(v: &mut Box<[T]>, x: T) -> bool {
            match v.binary_search(&x) {
                Ok(p) => {
                    edit(v, |v| {
                        v.remove(p);
                    });
                    true
                }
                Err(_) => false,
            }
        }
        match self {
            IntSet::I16(v) => i16::try_from(x).is_ok_and(|x| rm(v, x)),
            IntSet::I32(v) => i32::try_from(x).is_ok_and(|x| rm(v, x)),
            IntSet::I64(v) => rm(v, x),
        }
    }

    /// Remove and return member `i`.
    pub fn remove_index(&mut self, i: usize) -> Option<i64> {
        let x = self.get(i)?;
        self.remove(x);
        Some(x)
    }

    /// Members ascending.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrades_keep_order_and_membership() {
        let mut s = IntSet::new();
        assert!(s.insert(5) && s.insert(-3) && !s.insert(5));
        assert!(matches!(s, IntSet::I16(_)));
        assert!(s.insert(70_000));
        assert!(matches!(s, IntSet::I32(_)));
        assert!(s.insert(i64::MIN));
        assert!(matches!(s, IntSet::I64(_)));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![i64::MIN, -3, 5, 70_000]);
        assert!(s.contains(-3) && !s.contains(4));
        assert!(s.remove(5) && !s.remove(5));
        assert_eq!(s.len(), 3);
    }
}
