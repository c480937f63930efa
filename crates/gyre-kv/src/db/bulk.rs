//! Appending many new keys at once (the RDB loader's slices): the nodes
//! go to the end of the node vector first, and their chains are linked
//! afterwards in one tight pass ([`Db::link_appended`]).
//!
//! Why: inserting key by key, each insert's duplicate check read a random
//! bucket head and then a random node — two cache misses that nothing
//! overlapped, since reading and building the next value came in between
//! (perf: `Db::probe` was 49% of loading 1e6 small hashes). In a pass that
//! only hashes, walks chains and links, the loads of several keys are in
//! flight at once. Between the append and the link the table does not
//! know the new keys, so both happen within one call of the loader (no
//! command or cron runs in between).

use super::node::{New, Node, Slot, Value};
use super::table::buckets_for;
use super::{entry_mem, Db, Probe, NONE};
use crate::object::Object;

/// A new key's value for [`Db::append_unlinked`].
pub enum Appended {
    Str(Vec<u8>),
    Obj(Object),
}

impl Db {
    /// Whether [`Db::append_unlinked`] may be used now: no background
    /// sweep (it must see every new key through its bucket) and nobody
    /// watching keys.
    pub fn can_append(&self) -> bool {
        !self.snapshot_active() && !self.noting()
    }

    /// Push a key that the caller will link with [`Db::link_appended`]
    /// before anything else uses this database; its probe (for a TTL).
    pub fn append_unlinked(&mut self, key: &[u8], v: Appended, now_ms: i64) -> Probe {
        let hash = self.hash(key);
        let value = match v {
            Appended::Str(s) => Value::Str(s),
            Appended::Obj(o) => Value::Obj(o),
        };
        let slot = Slot::new(key, New::Owned(value), self.access_mode.new_key(now_ms));
        self.mem += entry_mem(&slot);
        let idx = self.nodes.len();
        self.nodes.push(Node {
            hash,
            next: NONE,
            slot,
        });
        Probe {
            hash,
            index: Some(idx),
        }
    }

    /// Link nodes `from..` (pushed by [`Db::append_unlinked`]) into the
    /// table. Err: the first of them whose key was already there (older
    /// or among them). Every node is linked either way (the table stays
    /// whole); a load that gets the error is abandoned.
    pub fn link_appended(&mut self, from: usize) -> Result<(), Vec<u8>> {
        let n = self.nodes.len();
        if from >= n {
            return Ok(());
        }
        if self.table.growing() || n > self.table.buckets() {
            // Grown at once over the nodes already linked (the loader
            // pre-sizes from RESIZEDB, so this is a file without it).
            self.finish_growing();
            if n > self.table.buckets() {
                self.rehash_prefix(buckets_for(n.max(2 * self.table.buckets())), from);
            }
        }
        let mut dup = None;
        for i in from..n {
            let h = self.nodes[i].hash;
            let head = self.table.head(h);
            let mut j = head;
            while let Some(m) = self.nodes.get(j as usize) {
                if m.hash == h && dup.is_none() && m.key() == self.nodes[i].key() {
                    dup = Some(i);
                }
                j = m.next;
            }
            self.nodes[i].next = head;
            self.table.set_head(h, i as u32);
        }
        match dup {
            Some(i) => Err(self.nodes[i].key().to_vec()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Keys appended in batches (no pre-sizing: the table grows from
    /// empty, and with colliding hashes) are found afterwards with their
    /// values and TTLs, and the table is whole.
    #[test]
    fn appended_batches_are_found() {
        for mask in [u64::MAX, 0xf] {
            let mut db = Db::new(7);
            db.hash_mask = mask;
            db.set(b"old", b"v".to_vec(), false);
            let mut n = 0u32;
            for batch in [1usize, 3, 500, 2000] {
                let from = db.len();
                for _ in 0..batch {
                    let key = format!("key:{n:012}");
                    let v = if n % 2 == 0 {
                        Appended::Str(vec![b'x'; (n % 120) as usize])
                    } else {
                        Appended::Str(key.as_bytes().to_vec())
                    };
                    let p = db.append_unlinked(key.as_bytes(), v, 0);
                    if n % 5 == 0 {
                        db.set_expire_probed(&p, 1_000_000 + i64::from(n));
                    }
                    n += 1;
                }
                db.link_appended(from).unwrap();
                assert!(db.table_ok(), "mask {mask:x}");
            }
            assert_eq!(db.len(), n as usize + 1);
            for i in 0..n {
                let key = format!("key:{i:012}");
                let want = if i % 2 == 0 {
                    vec![b'x'; (i % 120) as usize]
                } else {
                    key.as_bytes().to_vec()
                };
                let e = db.lookup_read(key.as_bytes(), 0).unwrap();
                assert_eq!(e.str().unwrap(), &want[..], "{key}");
                let ttl = db.get_expire(key.as_bytes());
                assert_eq!(ttl, (i % 5 == 0).then(|| 1_000_000 + i64::from(i)));
            }
            assert!(db.lookup_read(b"old", 0).is_some());
        }
    }

    /// A key appended twice, or appended over an existing one, is the
    /// error, naming the key; the table stays whole.
    #[test]
    fn duplicates_are_reported() {
        let mut db = Db::new(1);
        db.set(b"there", b"1".to_vec(), false);
        db.append_unlinked(b"a", Appended::Str(b"1".to_vec()), 0);
        db.append_unlinked(b"there", Appended::Str(b"2".to_vec()), 0);
        assert_eq!(db.link_appended(1), Err(b"there".to_vec()));
        assert!(db.table_ok());
        let from = db.len();
        db.append_unlinked(b"b", Appended::Str(b"1".to_vec()), 0);
        db.append_unlinked(b"b", Appended::Str(b"2".to_vec()), 0);
        assert_eq!(db.link_appended(from), Err(b"b".to_vec()));
        assert!(db.table_ok());
        assert_eq!(db.link_appended(db.len()), Ok(()));
    }
}
