//! The RDB writer: byte-exact Redis 7.0 encodings appended to a buffer.
//! Callers stream the buffer to a file ([`super::file`]) and keep the
//! running CRC64; DUMP uses [`put_value`] alone.

use super::blob::{intset_build, lp_build};
use super::*;
use crate::db::Ref;
use crate::object::Object;
use crate::t_hash::HashObj;
use crate::t_set::SetObj;
use crate::util::string2ll;
use crate::zset::ZSet;

/// Entries per listpack node of a saved list, and its byte budget: the
/// node size Redis uses by default (`list-max-listpack-size -2`: 8 KiB).
const LIST_NODE_ENTRIES: usize = 128;
const LIST_NODE_BYTES: usize = 8 * 1024;

/// How a saved list's elements are cut into listpack nodes (up to
/// [`LIST_NODE_ENTRIES`] entries and [`LIST_NODE_BYTES`] bytes, counting
/// 2 bytes of overhead per entry): the one rule of [`put_payload`] and of
/// the resumable writer ([`super::resume`]), which must cut alike.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct NodePacker {
    entries: usize,
    bytes: usize,
}

impl NodePacker {
    /// Counts the next element, `len` bytes; true when it starts a new
    /// node (always for the first).
    #[inline]
    pub(super) fn starts_node(&mut self, len: usize) -> bool {
        if self.entries > 0
            && self.entries < LIST_NODE_ENTRIES
            && self.bytes + len <= LIST_NODE_BYTES
        {
            self.entries += 1;
            self.bytes += len + 2;
            false
        } else {
            self.entries = 1;
            self.bytes = len + 2;
            true
        }
    }
}

/// Redis's `rdbSaveLen`.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    let mut b = [0u8; 9];
    let k = len_into(&mut b, n);
    out.extend_from_slice(&b[..k]);
}

/// [`put_len`] into a fixed buffer (at least 9 bytes); bytes written.
fn len_into(b: &mut [u8], n: u64) -> usize {
    if n < 1 << 6 {
        b[0] = n as u8;
        1
    } else if n < 1 << 14 {
        b[0] = 0x40 | (n >> 8) as u8;
        b[1] = n as u8;
        2
    } else if n <= u64::from(u32::MAX) {
        b[0] = 0x80;
        b[1..5].copy_from_slice(&(n as u32).to_be_bytes());
        5
    } else {
        b[0] = 0x81;
        b[1..9].copy_from_slice(&n.to_be_bytes());
        9
    }
}

/// Redis's `rdbSaveRawString`: int-encoded when the text is a canonical
/// integer that fits 32 bits, LZF-compressed when asked and worth it.
pub fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(x) = string2ll(s) {
            if let Ok(b) = i8::try_from(x) {
                out.extend_from_slice(&[0xc0 | ENC_INT8, b as u8]);
                return;
            }
            if let Ok(h) = i16::try_from(x) {
                out.push(0xc0 | ENC_INT16);
                out.extend_from_slice(&h.to_le_bytes());
                return;
            }
            if let Ok(w) = i32::try_from(x) {
                out.push(0xc0 | ENC_INT32);
                out.extend_from_slice(&w.to_le_bytes());
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        // Compressed straight into `out` after room for the header (the
        // type byte and two lengths, at most 1 + 5 + 5 bytes for a string
        // under 4 GiB), which is then written and the bytes moved back.
        const ROOM: usize = 1 + 9 + 9;
        let at = out.len();
        out.resize(at + ROOM, 0);
        if lzf::compress_into(s, s.len() - 4, out) {
            let clen = out.len() - at - ROOM;
            let mut head = [0u8; ROOM];
            head[0] = 0xc0 | ENC_LZF;
            let mut n = 1;
            n += len_into(&mut head[n..], clen as u64);
            n += len_into(&mut head[n..], s.len() as u64);
            out.copy_within(at + ROOM.., at + n);
            out.truncate(at + n + clen);
            out[at..at + n].copy_from_slice(&head[..n]);
            return;
        }
        out.truncate(at);
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// The value's type byte (Redis's `rdbSaveObjectType`).
pub fn value_type(v: Ref<'_>) -> u8 {
    match v {
        Ref::Str(_) => TYPE_STRING,
        Ref::Obj(Object::Hash(HashObj::Listpack(_))) => TYPE_HASH_LISTPACK,
        Ref::Obj(Object::Hash(HashObj::Table(_))) => TYPE_HASH,
        Ref::Obj(Object::List(_)) => TYPE_LIST_QUICKLIST_2,
        Ref::Obj(Object::Set(SetObj::Intset(_))) => TYPE_SET_INTSET,
        Ref::Obj(Object::Set(SetObj::Table(_))) => TYPE_SET,
        Ref::Obj(Object::Zset(ZSet::Listpack(_))) => TYPE_ZSET_LISTPACK,
        Ref::Obj(Object::Zset(ZSet::Large(_))) => TYPE_ZSET_2,
    }
}

/// Type byte and payload (Redis's `rdbSaveObjectType` + `rdbSaveObject`).
pub fn put_value(out: &mut Vec<u8>, v: Ref<'_>, compress: bool) {
    out.push(value_type(v));
    put_payload(out, v, compress);
}

/// The value without its type byte (`rdbSaveObject`).
pub fn put_payload(out: &mut Vec<u8>, v: Ref<'_>, compress: bool) {
    match v {
        Ref::Str(s) => put_string(out, s, compress),
        Ref::Obj(Object::Hash(HashObj::Listpack(lp))) => {
            put_string(out, &lp_build(lp.iter()), compress);
        }
        Ref::Obj(Object::Hash(HashObj::Table(d))) => {
            put_len(out, d.len() as u64);
            for (f, val) in d.iter() {
                put_string(out, f, compress);
                put_string(out, val, compress);
            }
        }
        Ref::Obj(Object::List(l)) => {
            // Nodes as Redis would pack them (`NodePacker`).
            let mut nodes: Vec<Vec<&[u8]>> = Vec::new();
            let mut packer = NodePacker::default();
            for e in l.iter() {
                let new = packer.starts_node(e.len());
                match nodes.last_mut() {
                    Some(n) if !new => n.push(e),
                    _ => nodes.push(vec![e]),
                }
            }
            put_len(out, nodes.len() as u64);
            for n in nodes {
                put_len(out, QUICKLIST_PACKED);
                put_string(out, &lp_build(n.into_iter()), compress);
            }
        }
        Ref::Obj(Object::Set(SetObj::Intset(s))) => {
            let m: Vec<i64> = s.iter().collect();
            put_string(out, &intset_build(&m), compress);
        }
        Ref::Obj(Object::Set(SetObj::Table(d))) => {
            put_len(out, d.len() as u64);
            for (m, _) in d.iter() {
                put_string(out, m, compress);
            }
        }
        Ref::Obj(Object::Zset(z @ ZSet::Listpack(_))) => {
            // member, score, ...; the score as `%.17g` text (Redis's
            // `d2string`), which the listpack stores as an integer when
            // it is one.
            let mut flat: Vec<Vec<u8>> = Vec::with_capacity(2 * z.len());
            z.visit(0, z.len(), false, |m, s| {
                flat.push(m.to_vec());
                flat.push(crate::zset::score::format(s).into_bytes());
            });
            put_string(out, &lp_build(flat.iter().map(|v| v.as_slice())), compress);
        }
        Ref::Obj(Object::Zset(z @ ZSet::Large(_))) => {
            // Greatest to smallest, as Redis (its loader inserts at the head).
            put_len(out, z.len() as u64);
            z.visit(0, z.len(), true, |m, s| {
                put_string(out, m, compress);
                out.extend_from_slice(&s.to_le_bytes());
            });
        }
    }
}

/// One key: its expire (ms) if any, then type, key and value (Redis's
/// `rdbSaveKeyValuePair`).
pub fn put_kv(out: &mut Vec<u8>, key: &[u8], v: Ref<'_>, expire: Option<i64>, compress: bool) {
    if let Some(t) = expire {
        out.push(OP_EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(value_type(v));
    put_string(out, key, compress);
    put_payload(out, v, compress);
}

/// An AUX field (`rdbSaveAuxField`).
pub fn put_aux(out: &mut Vec<u8>, key: &str, val: &[u8]) {
    out.push(OP_AUX);
    put_string(out, key.as_bytes(), false);
    put_string(out, val, false);
}

/// What the header's AUX fields say.
#[derive(Clone, Debug)]
pub struct Aux {
    pub ctime_secs: i64,
    pub used_mem: u64,
    /// `aof-base`: 1 in an AOF's RDB preamble.
    pub aof_base: bool,
}

/// `REDIS0010` and the AUX fields Redis 7.0 writes without replication.
pub fn put_header(out: &mut Vec<u8>, aux: &Aux) {
    out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
    put_aux(out, "redis-ver", crate::REDIS_VERSION.as_bytes());
    put_aux(out, "redis-bits", b"64");
    put_aux(out, "ctime", aux.ctime_secs.to_string().as_bytes());
    put_aux(out, "used-mem", aux.used_mem.to_string().as_bytes());
    put_aux(out, "aof-base", if aux.aof_base { b"1" } else { b"0" });
}

/// SELECTDB and the RESIZEDB hint.
pub fn put_select(out: &mut Vec<u8>, db: usize, keys: usize, expires: usize) {
    out.push(OP_SELECTDB);
    put_len(out, db as u64);
    out.push(OP_RESIZEDB);
    put_len(out, keys as u64);
    put_len(out, expires as u64);
}

/// A DUMP payload: value, RDB version (2 bytes LE), CRC64 (8 bytes LE)
/// of everything before it.
pub fn dump_payload(v: Ref<'_>, compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    put_value(&mut out, v, compress);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_int_strings_as_redis_writes_them() {
        let mut o = Vec::new();
        put_len(&mut o, 63);
        put_len(&mut o, 64);
        put_len(&mut o, 20000);
        assert_eq!(o, [63, 0x40, 64, 0x80, 0, 0, 0x4e, 0x20]);
        let mut o = Vec::new();
        put_string(&mut o, b"-5", false);
        put_string(&mut o, b"300", false);
        put_string(&mut o, b"70000", false);
        put_string(&mut o, b"05", false);
        assert_eq!(
            o,
            [0xc0, 0xfb, 0xc1, 0x2c, 0x01, 0xc2, 0x70, 0x11, 0x01, 0x00, 2, b'0', b'5']
        );
    }
}
