//! Sets (Redis's `t_set.c`): the storage and its two encodings, and the
//! set commands.
//!
//! Encodings, as Redis 7.0: an [`IntSet`] while every member is an
//! integer in canonical form and there are at most
//! `set-max-intset-entries` of them; otherwise a hashtable ([`Dict`]),
//! for good. (Redis 7.2 added listpack sets for small non-integer sets;
//! `set-max-listpack-entries` is accepted but 7.0's behaviour kept.)

use crate::dict::Dict;
use crate::intset::IntSet;
use crate::object::Limits;
use crate::util::string2ll;

#[derive(Clone, Debug)]
pub enum SetObj {
    Intset(IntSet),
    Table(Dict<()>),
}

/// A member as an intset integer: Redis's `isSdsRepresentableAsLongLong`
/// (canonical decimal only: no `+`, no leading zeros, no `-0`).
pub fn as_int(m: &[u8]) -> Option<i64> {
    string2ll(m)
}

impl SetObj {
    /// Redis's `setTypeCreate`: an intset if the first member is an integer.
    pub fn for_member(m: &[u8]) -> SetObj {
        if as_int(m).is_some() {
            SetObj::Intset(IntSet::new())
        } else {
            SetObj::Table(Dict::new())
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SetObj::Intset(s) => s.len(),
            SetObj::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            SetObj::Intset(_) => "intset",
            SetObj::Table(_) => "hashtable",
        }
    }

    pub fn mem(&self) -> usize {
        match self {
            SetObj::Intset(s) => s.capacity_bytes(),
            SetObj::Table(d) => d.mem(),
        }
    }

    fn convert_to_table(&mut self, extra: usize) {
        if let SetObj::Intset(s) = self {
            let mut d = Dict::with_capacity(s.len() + extra);
            for x in s.iter() {
                d.insert(x.to_string().as_bytes(), ());
            }
            *self = SetObj::Table(d);
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            SetObj::Intset(s) => as_int(m).is_some_and(|x| s.contains(x)),
            SetObj::Table(d) => d.contains(m),
        }
    }

    /// Add `m`; true if it is new.
    pub fn add(&mut self, m: &[u8], lim: &Limits) -> bool {
        if let SetObj::Intset(s) = self {
            match as_int(m) {
                Some(x) => {
                    if !s.insert(x) {
                        return false;
                    }
                    if s.len() as u64 > lim.set_max_intset_entries {
                        self.convert_to_table(0);
                    }
                    return true;
                }
                None => self.convert_to_table(1),
            }
        }
        match self {
            SetObj::Table(d) => d.insert(m, ()).is_none(),
            SetObj::Intset(_) => false,
        }
    }

    /// Remove `m`; true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            SetObj::Intset(s) => as_int(m).is_some_and(|x| s.remove(x)),
            SetObj::Table(d) => d.remove(m).is_some(),
        }
    }

    /// Member `i` of the encoding's order (O(1)).
    pub fn member(&self, i: usize) -> Option<Vec<u8>> {
        match self {
            SetObj::Intset(s) => s.get(i).map(|x| x.to_string().into_bytes()),
            SetObj::Table(d) => d.entry(i).map(|(k, _)| k.to_vec()),
        }
    }

    /// Remove member `i` of the encoding's order.
    pub fn remove_index(&mut self, i: usize) -> Option<Vec<u8>> {
        match self {
            SetObj::Intset(s) => s.remove_index(i).map(|x| x.to_string().into_bytes()),
            SetObj::Table(d) => d.remove_index(i).map(|(k, _)| k.into_vec()),
        }
    }

    /// Members in the encoding's order (ascending for an intset).
    pub fn members(&self) -> Vec<Vec<u8>> {
        match self {
            SetObj::Intset(s) => s.iter().map(|x| x.to_string().into_bytes()).collect(),
            SetObj::Table(d) => d.iter().map(|(k, _)| k.to_vec()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intset_until_a_string_or_too_many() {
        let lim = Limits {
            set_max_intset_entries: 3,
            ..Limits::default()
        };
        let mut s = SetObj::for_member(b"1");
        for m in [&b"3"[..], b"1", b"2"] {
            s.add(m, &lim);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(
            s.members(),
            vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        assert!(!s.contains(b"01") && s.contains(b"2"));
        assert!(s.add(b"4", &lim));
        assert_eq!(s.encoding(), "hashtable");
        let mut t = SetObj::for_member(b"1");
        t.add(b"1", &lim);
        assert!(t.add(b"01", &lim));
        assert_eq!((t.encoding(), t.len()), ("hashtable", 2));
        assert!(t.remove(b"1") && t.remove(b"01") && t.is_empty());
    }
}
