//! Hashes (Redis's `t_hash.c`): the storage and its two encodings, and the
//! hash commands.
//!
//! Encodings: a listpack of field, value, field, value ... while the hash
//! has at most `hash-max-listpack-entries` fields and no field or value
//! longer than `hash-max-listpack-value`; past either, a hashtable
//! ([`Dict`]) for good (Redis never converts back). Listpack order is
//! insertion order (an updated field keeps its place), as Redis's.

use crate::dict::Dict;
use crate::listpack::Listpack;
use crate::object::Limits;

#[derive(Clone, Debug)]
pub enum HashObj {
    Listpack(Listpack),
    Table(Dict<Box<[u8]>>),
}

impl Default for HashObj {
    fn default() -> Self {
        HashObj::Listpack(Listpack::new())
    }
}

/// Offset of `field` in a field/value listpack, and of its value.
fn lp_find(lp: &Listpack, field: &[u8]) -> Option<(usize, usize)> {
    let mut off = lp.first();
    while let Some((f, voff)) = lp.at(off) {
        let (_, next) = lp.at(voff)?;
        if f == field {
            return Some((off, voff));
        }
        off = next;
    }
    None
}

impl HashObj {
    pub fn new() -> HashObj {
        HashObj::default()
    }

    pub fn len(&self) -> usize {
        match self {
            HashObj::Listpack(lp) => lp.len() / 2,
            HashObj::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            HashObj::Listpack(_) => "listpack",
            HashObj::Table(_) => "hashtable",
        }
    }

    pub fn mem(&self) -> usize {
        match self {
            HashObj::Listpack(lp) => lp.capacity(),
            HashObj::Table(d) => d.mem() + d.iter().map(|(_, v)| v.len()).sum::<usize>(),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashObj::Listpack(lp) => {
                let (_, voff) = lp_find(lp, field)?;
                lp.at(voff).map(|(v, _)| v)
            }
            HashObj::Table(d) => d.get(field).map(|v| &**v),
        }
    }

    fn convert_to_table(&mut self) {
        if let HashObj::Listpack(lp) = self {
            let mut d = Dict::with_capacity(lp.len() / 2 + 1);
            let mut it = lp.iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                d.insert(f, v.into());
            }
            *self = HashObj::Table(d);
        }
    }

    /// Redis's `hashTypeTryConversion`: a field or value over the value
    /// limit turns a listpack into a hashtable before it is written.
    pub fn convert_for(&mut self, args: &[&[u8]], lim: &Limits) {
        if matches!(self, HashObj::Listpack(_))
            && args
                .iter()
                .any(|a| a.len() as u64 > lim.hash_max_listpack_value)
        {
            self.convert_to_table();
        }
    }

    /// Set `field` to `value`; true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: &Limits) -> bool {
        self.convert_for(&[field, value], lim);
        let new = match self {
            HashObj::Listpack(lp) => match lp_find(lp, field) {
                Some((_, voff)) => {
                    lp.replace_at(voff, value);
                    false
                }
                None => {
                    lp.push_back(field);
                    lp.push_back(value);
                    true
                }
            },
            HashObj::Table(d) => d.insert(field, value.into()).is_none(),
        };
        if self.len() as u64 > lim.hash_max_listpack_entries {
            self.convert_to_table();
        }
        new
    }

    /// Delete `field`; true if it was there.
    pub fn del(&mut self, field: &[u8]) -> bool {
        match self {
            HashObj::Listpack(lp) => match lp_find(lp, field) {
                Some((off, _)) => {
                    lp.remove_at(off);
                    lp.remove_at(off);
                    lp.shrink();
                    true
                }
                None => false,
            },
            HashObj::Table(d) => d.remove(field).is_some(),
        }
    }

    /// Field/value pairs in the encoding's order.
    pub fn pairs(&self) -> Vec<(&[u8], &[u8])> {
        match self {
            HashObj::Listpack(lp) => {
                let mut out = Vec::with_capacity(lp.len() / 2);
                let mut it = lp.iter();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    out.push((f, v));
                }
                out
            }
            HashObj::Table(d) => d.iter().map(|(k, v)| (k, &**v)).collect(),
        }
    }

    /// Pair `i` of the encoding's order (O(1) for a hashtable).
    pub fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            HashObj::Listpack(lp) => {
                let off = lp.offset_of(2 * i)?;
                let (f, voff) = lp.at(off)?;
                Some((f, lp.at(voff)?.0))
            }
            HashObj::Table(d) => d.entry(i).map(|(k, v)| (k, &**v)),
        }
    }

    pub fn is_table(&self) -> bool {
        matches!(self, HashObj::Table(_))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn converts_at_the_thresholds_and_keeps_contents() {
        let lim = Limits {
            hash_max_listpack_entries: 4,
            hash_max_listpack_value: 8,
            ..Limits::default()
        };
        let mut h = HashObj::new();
        for i in 0..4 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v", &lim));
        }
        assert!(!h.set(b"f1", b"v1", &lim));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.pairs()[1], (&b"f1"[..], &b"v1"[..]));
        assert!(h.set(b"f4", b"v", &lim));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f1"), Some(&b"v1"[..]));
        assert_eq!(h.len(), 5);
        let mut g = HashObj::new();
        g.set(b"f", b"a-long-value", &lim);
        assert_eq!(g.encoding(), "hashtable");
        assert!(g.del(b"f") && g.is_empty());
    }
}
