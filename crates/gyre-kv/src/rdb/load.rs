//! The RDB reader (Redis's `rdbLoad` / `rdbLoadObject`): a whole file
//! into the databases, or one value (RESTORE).
//!
//! Reading streams through a `Read` with the CRC64 kept as it goes, so a
//! file is never held in memory whole. Lengths from the file never size an
//! allocation up front beyond what was actually read ([`Reader::bytes`]
//! grows as data arrives), so a corrupt length fails as a short read
//! instead of an out-of-memory abort.

use std::io::Read;

use super::blob::{intset_parse, lp_each, lp_parse, ziplist_parse};
use super::*;
use crate::db::{Appended, Db};
use crate::object::{Limits, Object};
use crate::quicklist::{Fill, Quicklist};
use crate::t_hash::HashObj;
use crate::t_set::SetObj;

/// How much a [`Reader`] reads ahead from a file.
const READ_AHEAD: usize = 64 * 1024;

/// A stream with its CRC64 and offset.
///
/// The reader keeps its own read-ahead buffer and brings the CRC up to
/// date over whole spans of it (on refill, or when asked), not per field:
/// a dump of small values is mostly one- to ten-byte reads, and a CRC step
/// per read was most of the reader's time. It may therefore read past the
/// end of the RDB data; nothing reads the stream after it.
pub struct Reader<R> {
    r: R,
    buf: Vec<u8>,
    /// Next unread byte of `buf`.
    pos: usize,
    /// `buf[..crc_from]` is already in `crc`.
    crc_from: usize,
    crc: u64,
    /// Stream offset of `buf[0]`.
    base: u64,
    cap: usize,
    /// What [`Reader::string_scratch`] reads into (one buffer for every
    /// blob of a load).
    scratch: Vec<u8>,
    /// Where a blob is re-encoded before it gets its own allocation.
    encoded: Vec<u8>,
}

fn corrupt(m: impl Into<String>) -> Error {
    Error::Corrupt(m.into())
}

impl<R: Read> Reader<R> {
    pub fn new(r: R) -> Reader<R> {
        Reader::with_read_ahead(r, READ_AHEAD)
    }

    /// A reader that reads at most `cap` bytes ahead (a RESTORE payload:
    /// its own length).
    pub fn with_read_ahead(r: R, cap: usize) -> Reader<R> {
        Reader {
            r,
            buf: Vec::new(),
            pos: 0,
            crc_from: 0,
            crc: 0,
            base: 0,
            cap: cap.clamp(16, READ_AHEAD),
            scratch: Vec::new(),
            encoded: Vec::new(),
        }
    }

    /// The CRC64 of everything read so far.
    pub fn crc(&mut self) -> u64 {
        self.crc = crc64::crc64(self.crc, &self.buf[self.crc_from..self.pos]);
        self.crc_from = self.pos;
        self.crc
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Moves the unread bytes to the front and reads more after them; 0
    /// at the end of the stream.
    fn refill(&mut self) -> Result<usize, Error> {
        self.crc();
        let unread = self.buf.len() - self.pos;
        self.buf.copy_within(self.pos.., 0);
        self.base += self.pos as u64;
        self.pos = 0;
        self.crc_from = 0;
        self.buf.resize(unread.max(self.cap), 0);
        let got = loop {
            match self.r.read(&mut self.buf[unread..]) {
                Ok(n) => break Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            }
        };
        let n = got.as_ref().map_or(0, |&n| n);
        self.buf.truncate(unread + n);
        Ok(got?)
    }

    fn fill(&mut self, out: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        loop {
            let k = (self.buf.len() - self.pos).min(out.len() - done);
            out[done..done + k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            done += k;
            if done == out.len() {
                return Ok(());
            }
            if self.refill()? == 0 {
                return Err(Error::Short);
            }
        }
    }

    pub fn byte(&mut self) -> Result<u8, Error> {
        if let Some(&b) = self.buf.get(self.pos) {
            self.pos += 1;
            return Ok(b);
        }
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// `n` bytes, read in chunks of at most 64 KiB.
    pub fn bytes(&mut self, n: u64) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.bytes_into(n, &mut out)?;
        Ok(out)
    }

    /// [`Reader::bytes`] appended to `out`: straight from the read-ahead
    /// when it holds them (the common case: keys and small values), else
    /// in chunks of at most 64 KiB (a length from the file is not
    /// believed further than the bytes that arrive).
    fn bytes_into(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), Error> {
        if let Some(b) = usize::try_from(n)
            .ok()
            .and_then(|n| self.buf.get(self.pos..self.pos.checked_add(n)?))
        {
            out.extend_from_slice(b);
            self.pos += b.len();
            return Ok(());
        }
        out.reserve(n.min(64 * 1024) as usize);
        let mut left = n;
        while left > 0 {
            let k = left.min(64 * 1024) as usize;
            let at = out.len();
            out.resize(at + k, 0);
            self.fill(&mut out[at..])?;
            left -= k as u64;
        }
        Ok(())
    }

    /// A length, or a special string encoding (`rdbLoadLenByRef`):
    /// `(value, true)` means `value` is an `ENC_*`.
    pub fn len_or_enc(&mut self) -> Result<(u64, bool), Error> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => (u64::from(b & 0x3f), false),
            1 => ((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?), false),
            2 => match b {
                0x80 => (u64::from(u32::from_be_bytes(self.array()?)), false),
                0x81 => (u64::from_be_bytes(self.array()?), false),
                _ => {
                    return Err(corrupt(format!(
                        "unknown length encoding {b} in rdbLoadLen()"
                    )))
                }
            },
            _ => (u64::from(b & 0x3f), true),
        })
    }

    pub fn length(&mut self) -> Result<u64, Error> {
        match self.len_or_enc()? {
            (n, false) => Ok(n),
            (_, true) => Err(corrupt("unexpected string encoding where a length was due")),
        }
    }

    /// A string in any of its encodings (`rdbGenericLoadStringObject`).
    pub fn string(&mut self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.string_into(&mut out)?;
        Ok(out)
    }

    /// [`Reader::string`] into `out` (cleared first), so the loader reads
    /// every key into one buffer instead of allocating one per key.
    pub fn string_into(&mut self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.clear();
        let (n, enc) = self.len_or_enc()?;
        if !enc {
            return self.bytes_into(n, out);
        }
        *out = self.encoded_string(n)?;
        Ok(())
    }

    /// A string read into the reader's own buffer, for a blob that is
    /// decoded at once (no allocation per listpack or intset).
    pub fn string_scratch(&mut self) -> Result<&[u8], Error> {
        let mut b = std::mem::take(&mut self.scratch);
        let r = self.string_into(&mut b);
        self.scratch = b;
        r?;
        Ok(&self.scratch)
    }

    /// A string in special encoding `n` (an integer or LZF).
    fn encoded_string(&mut self, n: u64) -> Result<Vec<u8>, Error> {
        match n as u8 {
            ENC_INT8 => Ok((self.byte()? as i8).to_string().into_bytes()),
            ENC_INT16 => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            ENC_INT32 => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            ENC_LZF => {
                let clen = self.length()?;
                let ulen = self.length()?;
                if ulen == 0 || ulen > 1 << 40 {
                    return Err(corrupt("bad LZF string length"));
                }
                // Straight from the read-ahead when it holds the bytes
                // (nearly always): no copy and no allocation for them.
                let held = usize::try_from(clen)
                    .ok()
                    .and_then(|n| Some(self.pos..self.pos.checked_add(n)?))
                    .filter(|r| r.end <= self.buf.len());
                let out = match held {
                    Some(r) => {
                        let out = lzf::decompress(&self.buf[r.clone()], ulen as usize);
                        self.pos = r.end;
                        out
                    }
                    None => lzf::decompress(&self.bytes(clen)?, ulen as usize),
                };
                out.ok_or_else(|| corrupt("invalid LZF compressed string"))
            }
            e => Err(corrupt(format!("unknown RDB string encoding type {e}"))),
        }
    }

    /// A `RDB_TYPE_ZSET` score: length byte, 253 nan, 254 +inf, 255 -inf.
    fn double_text(&mut self) -> Result<f64, Error> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let b = self.bytes(u64::from(n))?;
                parse_score(&b)
            }
        }
    }
}

fn parse_score(b: &[u8]) -> Result<f64, Error> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| corrupt("bad zset score"))
}

/// A value as read, before it goes into a database.
#[derive(Debug)]
pub enum Loaded {
    Str(Vec<u8>),
    Obj(Object),
    /// Sorted-set members and scores (built into a `ZSet` by [`store`]).
    Zset(Vec<(Vec<u8>, f64)>),
}

fn hash_from(pairs: Pairs, lim: &Limits) -> Result<Option<Loaded>, Error> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut h = HashObj::new();
    for (f, v) in &pairs {
        if !h.set(f, v, lim) {
            return Err(corrupt("Duplicate hash fields detected"));
        }
    }
    Ok(Some(Loaded::Obj(Object::Hash(h))))
}

/// A hash from a Redis listpack blob. Redis's format is not gyre's, so it
/// is re-encoded: when the hash stays a listpack here (the usual case:
/// same thresholds as the saving server), its entries are gathered once
/// and the listpack built in one allocation; otherwise field by field.
fn hash_from_listpack(b: &[u8], lim: &Limits, enc: &mut Vec<u8>) -> Result<Option<Loaded>, Error> {
    // One walk: checks the blob and re-encodes it into `enc`.
    enc.clear();
    let (mut count, mut longest) = (0usize, 0usize);
    lp_each(b, |e| {
        count += 1;
        longest = longest.max(e.len());
        crate::listpack::write_entry(enc, e);
    })
    .map_err(|_| corrupt("Listpack integrity check failed"))?;
    if count % 2 != 0 {
        return Err(corrupt("odd number of entries in a field/value blob"));
    }
    if count == 0 {
        return Ok(None);
    }
    if count as u64 / 2 > lim.hash_max_listpack_entries
        || longest as u64 > lim.hash_max_listpack_value
    {
        return hash_by_field(b, lim);
    }
    let lp = crate::listpack::Listpack::from_encoded(enc, count as u32);
    let h = HashObj::from_listpack(lp);
    if h.has_duplicate_field() {
        return Err(corrupt("Duplicate hash fields detected"));
    }
    Ok(Some(Loaded::Obj(Object::Hash(h))))
}

/// [`hash_from_listpack`] one field at a time (a hash that converts).
fn hash_by_field(b: &[u8], lim: &Limits) -> Result<Option<Loaded>, Error> {
    let mut h = HashObj::new();
    let mut field: Vec<u8> = Vec::new();
    let (mut odd, mut dup) = (false, false);
    lp_each(b, |e| {
        if odd {
            dup |= !h.set(&field, e, lim);
        } else {
            field.clear();
            field.extend_from_slice(e);
        }
        odd = !odd;
    })
    .map_err(|_| corrupt("Listpack integrity check failed"))?;
    if odd {
        return Err(corrupt("odd number of entries in a field/value blob"));
    }
    if dup {
        return Err(corrupt("Duplicate hash fields detected"));
    }
    Ok((!h.is_empty()).then_some(Loaded::Obj(Object::Hash(h))))
}

fn list_from(elems: Vec<Vec<u8>>, lim: &Limits) -> Option<Loaded> {
    if elems.is_empty() {
        return None;
    }
    let fill = Fill::from_conf(lim.list_max_listpack_size);
    let mut l = Quicklist::new();
    for e in &elems {
        l.push_back(e, fill);
    }
    Some(Loaded::Obj(Object::List(l)))
}

/// Field/value pairs.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn pairs(flat: Vec<Vec<u8>>) -> Result<Pairs, Error> {
    if flat.len() % 2 != 0 {
        return Err(corrupt("odd number of entries in a field/value blob"));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

fn zset_from_flat(flat: Vec<Vec<u8>>) -> Result<Option<Loaded>, Error> {
    let mut z = Vec::new();
    for (m, s) in pairs(flat)? {
        z.push((m, parse_score(&s)?));
    }
    Ok((!z.is_empty()).then_some(Loaded::Zset(z)))
}

/// Cap on elements pre-reserved from a length read from the file.
const RESERVE_CAP: u64 = 4096;

/// One value of type `t` (`rdbLoadObject`); `None` for an empty aggregate
/// (Redis skips those keys with a log line).
pub fn value<R: Read>(rd: &mut Reader<R>, t: u8, lim: &Limits) -> Result<Option<Loaded>, Error> {
    let blob_err = |what: &str| corrupt(format!("{what} integrity check failed"));
    Ok(match t {
        TYPE_STRING => Some(Loaded::Str(rd.string()?)),
        // Aggregates are built element by element from the reader's
        // buffer: gathering them first cost a transient allocation per
        // element, freed between the kept ones (a 1e6-field hash loaded
        // to 131 MiB of RSS that way, 69 MiB when written live).
        TYPE_LIST => {
            let n = rd.length()?;
            let fill = Fill::from_conf(lim.list_max_listpack_size);
            let mut l = Quicklist::new();
            for _ in 0..n {
                l.push_back(rd.string_scratch()?, fill);
            }
            (n > 0).then_some(Loaded::Obj(Object::List(l)))
        }
        TYPE_SET => {
            let n = rd.length()?;
            let mut s: Option<SetObj> = None;
            for _ in 0..n {
                let m = rd.string_scratch()?;
                let set = s.get_or_insert_with(|| SetObj::for_member(m));
                if !set.add(m, lim) {
                    return Err(corrupt("Duplicate set members detected"));
                }
            }
            s.map(|s| Loaded::Obj(Object::Set(s)))
        }
        TYPE_HASH => {
            let n = rd.length()?;
            let mut h = HashObj::new();
            let mut field = Vec::new();
            for _ in 0..n {
                rd.string_into(&mut field)?;
                if !h.set(&field, rd.string_scratch()?, lim) {
                    return Err(corrupt("Duplicate hash fields detected"));
                }
            }
            (n > 0).then_some(Loaded::Obj(Object::Hash(h)))
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = rd.length()?;
            let mut z = Vec::with_capacity(n.min(RESERVE_CAP) as usize);
            for _ in 0..n {
                let m = rd.string()?;
                let s = if t == TYPE_ZSET_2 {
                    f64::from_le_bytes(rd.array()?)
                } else {
                    rd.double_text()?
                };
                if s.is_nan() {
                    return Err(corrupt("Zset with NAN score detected"));
                }
                z.push((m, s));
            }
            (!z.is_empty()).then_some(Loaded::Zset(z))
        }
        TYPE_SET_INTSET => {
            let b = rd.string()?;
            let m = intset_parse(&b).map_err(|_| blob_err("Intset"))?;
            let mut s = SetObj::Intset(crate::intset::IntSet::new());
            for x in m {
                s.add(x.to_string().as_bytes(), lim);
            }
            Some(Loaded::Obj(Object::Set(s)))
        }
        TYPE_HASH_LISTPACK => {
            let mut enc = std::mem::take(&mut rd.encoded);
            let h = hash_from_listpack(rd.string_scratch()?, lim, &mut enc);
            rd.encoded = enc;
            h?
        }
        TYPE_HASH_ZIPLIST => {
            let b = rd.string()?;
            let flat = ziplist_parse(&b).map_err(|_| blob_err("Ziplist"))?;
            hash_from(pairs(flat)?, lim)?
        }
        TYPE_ZSET_LISTPACK | TYPE_ZSET_ZIPLIST => {
            let b = rd.string()?;
            let flat = if t == TYPE_ZSET_LISTPACK {
                lp_parse(&b).map_err(|_| blob_err("Listpack"))?
            } else {
                ziplist_parse(&b).map_err(|_| blob_err("Ziplist"))?
            };
            zset_from_flat(flat)?
        }
        TYPE_LIST_ZIPLIST => {
            let b = rd.string()?;
            list_from(ziplist_parse(&b).map_err(|_| blob_err("Ziplist"))?, lim)
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = rd.length()?;
            let mut elems = Vec::new();
            for _ in 0..nodes {
                let container = if t == TYPE_LIST_QUICKLIST_2 {
                    rd.length()?
                } else {
                    QUICKLIST_PACKED
                };
                let b = rd.string()?;
                match container {
                    QUICKLIST_PLAIN => elems.push(b),
                    QUICKLIST_PACKED if t == TYPE_LIST_QUICKLIST_2 => {
                        lp_each(&b, |e| elems.push(e.to_vec())).map_err(|_| blob_err("Listpack"))?
                    }
                    QUICKLIST_PACKED => {
                        elems.extend(ziplist_parse(&b).map_err(|_| blob_err("Ziplist"))?)
                    }
                    c => {
                        return Err(corrupt(format!(
                            "Quicklist integrity check failed: container {c}"
                        )))
                    }
                }
            }
            list_from(elems, lim)
        }
        TYPE_HASH_ZIPMAP => {
            let b = rd.string()?;
            let flat = super::blob::zipmap_parse(&b).map_err(|_| blob_err("Zipmap"))?;
            hash_from(pairs(flat)?, lim)?
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 => {
            return Err(Error::Unsupported(
                "streams are not supported by gyre".into(),
            ))
        }
        6 | 7 => {
            return Err(Error::Unsupported(
                "module values are not supported by gyre".into(),
            ))
        }
        t => return Err(corrupt(format!("Unknown RDB encoding type {t}"))),
    })
}

/// What a load found.
#[derive(Debug, Default)]
pub struct LoadStats {
    pub version: u32,
    pub keys: u64,
    pub expired: u64,
    pub empty_skipped: u64,
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Store a loaded value; false if the key was already there.
pub fn store(
    db: &mut Db,
    key: &[u8],
    v: Loaded,
    expire: Option<i64>,
    now: i64,
    lim: &Limits,
) -> Result<bool, Error> {
    let p = db.probe(key, now);
    if p.found() {
        return Ok(false);
    }
    let p = match v {
        Loaded::Str(s) => db.insert_str(p, key, s),
        Loaded::Obj(o) => db.insert_obj(p, key, o),
        Loaded::Zset(z) => match zset_object(z, lim)? {
            Some(o) => db.insert_obj(p, key, o),
            None => return Ok(true),
        },
    };
    if let Some(t) = expire {
        db.set_expire_probed(&p, t);
    }
    Ok(true)
}

/// A sorted set built from its loaded members (`None`: none).
fn zset_object(z: Vec<(Vec<u8>, f64)>, lim: &Limits) -> Result<Option<Object>, Error> {
    let mut it = z.into_iter();
    let Some((m0, s0)) = it.next() else {
        return Ok(None);
    };
    let zl = crate::zset::Limits {
        max_listpack_entries: usize::try_from(lim.zset_max_listpack_entries).unwrap_or(usize::MAX),
        max_listpack_value: usize::try_from(lim.zset_max_listpack_value).unwrap_or(usize::MAX),
    };
    let mut zs = crate::zset::ZSet::for_first(&zl, m0.len());
    zs.set(&m0, s0, &zl);
    for (m, s) in it {
        if !zs.set(&m, s, &zl) {
            return Err(corrupt("Duplicate zset fields detected"));
        }
    }
    Ok(Some(Object::Zset(zs)))
}

/// A loaded value appended to `d` unlinked (see [`crate::db`]'s `bulk`
/// module); the caller links it before the slice ends.
fn append(
    d: &mut Db,
    key: &[u8],
    v: Loaded,
    expire: Option<i64>,
    now: i64,
    lim: &Limits,
) -> Result<(), Error> {
    let v = match v {
        Loaded::Str(s) => Appended::Str(s),
        Loaded::Obj(o) => Appended::Obj(o),
        Loaded::Zset(z) => match zset_object(z, lim)? {
            Some(o) => Appended::Obj(o),
            None => return Ok(()),
        },
    };
    let p = d.append_unlinked(key, v, now);
    if let Some(t) = expire {
        d.set_expire_probed(&p, t);
    }
    Ok(())
}

/// An RDB stream being loaded a slice at a time (the kv process keeps
/// answering `-LOADING` between slices).
pub struct Loader<R> {
    rd: Reader<R>,
    db: usize,
    pub stats: LoadStats,
    done: bool,
    /// Bytes the stream holds (0: unknown), bounding RESIZEDB's hint.
    size_hint: u64,
    /// The key being loaded (one buffer for all of them).
    key: Vec<u8>,
}

impl<R: Read> Loader<R> {
    /// Read and check the `REDISnnnn` header.
    pub fn start(r: R) -> Result<Loader<R>, Error> {
        let mut rd = Reader::new(r);
        let sig: [u8; 9] = rd.array()?;
        if &sig[..5] != b"REDIS" {
            return Err(Error::Signature);
        }
        let version = std::str::from_utf8(&sig[5..])
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0);
        if !(1..=u32::from(RDB_VERSION)).contains(&version) {
            return Err(Error::Version(version));
        }
        Ok(Loader {
            rd,
            db: 0,
            stats: LoadStats {
                version,
                ..LoadStats::default()
            },
            done: false,
            size_hint: 0,
            key: Vec::new(),
        })
    }

    /// The stream's size, so RESIZEDB may pre-size the databases.
    pub fn with_size(mut self, bytes: u64) -> Self {
        self.size_hint = bytes;
        self
    }

    /// Bytes read so far (INFO `loading_loaded_bytes`).
    pub fn offset(&self) -> u64 {
        self.rd.offset()
    }

    /// Load up to `max_keys` more keys; true at the end of the file (after
    /// the checksum was checked). Keys already expired at `now` are
    /// skipped, as a master does. With `check_crc`, a non-zero footer that
    /// does not match is an error (zero: saved with `rdbchecksum no`).
    pub fn step(
        &mut self,
        dbs: &mut [Db],
        lim: &Limits,
        now: i64,
        check_crc: bool,
        max_keys: u64,
    ) -> Result<bool, Error> {
        if self.done {
            return Ok(true);
        }
        // Where each database's keys appended in this slice start.
        let mut starts = Vec::new();
        let r = self.step_keys(dbs, lim, now, check_crc, max_keys, &mut starts);
        for (db, from) in starts {
            if let Some(d) = dbs.get_mut(db) {
                if let Err(key) = d.link_appended(from) {
                    if r.is_ok() {
                        return Err(duplicated(&key, db));
                    }
                }
            }
        }
        r
    }

    /// [`Loader::step`] without the linking of the appended keys.
    fn step_keys(
        &mut self,
        dbs: &mut [Db],
        lim: &Limits,
        now: i64,
        check_crc: bool,
        max_keys: u64,
        starts: &mut Vec<(usize, usize)>,
    ) -> Result<bool, Error> {
        let rd = &mut self.rd;
        let st = &mut self.stats;
        let mut expire: Option<i64> = None;
        let mut n = 0;
        loop {
            if n >= max_keys && expire.is_none() {
                return Ok(false);
            }
            let t = rd.byte()?;
            match t {
                OP_EXPIRETIME_MS => {
                    expire = Some(i64::from_le_bytes(rd.array()?));
                    continue;
                }
                OP_EXPIRETIME => {
                    expire = Some(i64::from(i32::from_le_bytes(rd.array()?)) * 1000);
                    continue;
                }
                OP_IDLE => {
                    rd.length()?;
                    continue;
                }
                OP_FREQ => {
                    rd.byte()?;
                    continue;
                }
                OP_SELECTDB => {
                    let d = rd.length()?;
                    if d >= dbs.len() as u64 {
                        return Err(corrupt(format!(
                            "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
                            dbs.len()
                        )));
                    }
                    self.db = d as usize;
                    continue;
                }
                OP_RESIZEDB => {
                    let keys = rd.length()?;
                    let expires = rd.length()?;
                    // A hint from the file: believed only as far as the
                    // file could hold that many keys (3+ bytes each).
                    let cap = self.size_hint / 3;
                    if let Some(d) = dbs.get_mut(self.db) {
                        d.reserve(keys.min(cap) as usize, expires.min(keys).min(cap) as usize);
                    }
                    continue;
                }
                OP_AUX => {
                    let k = rd.string()?;
                    let v = rd.string()?;
                    st.aux.push((k, v));
                    continue;
                }
                OP_MODULE_AUX => {
                    return Err(Error::Unsupported(
                        "module auxiliary data is not supported by gyre".into(),
                    ))
                }
                OP_FUNCTION2 => {
                    // A function library's code: gyre has no functions.
                    let lib = rd.string()?;
                    log::warn!(
                        "RDB function library ignored ({} bytes): gyre has no FUNCTION support",
                        lib.len()
                    );
                    continue;
                }
                OP_FUNCTION_PRE_GA => {
                    return Err(Error::Unsupported(
                        "pre-GA function format is not supported".into(),
                    ))
                }
                OP_EOF => break,
                _ => {}
            }
            rd.string_into(&mut self.key)?;
            let key = self.key.as_slice();
            let v = value(rd, t, lim)?;
            let e = expire.take();
            n += 1;
            let Some(v) = v else {
                st.empty_skipped += 1;
                if st.empty_skipped <= 10 {
                    log::warn!(
                        "rdbLoadObject skipping empty key: {}",
                        String::from_utf8_lossy(key)
                    );
                }
                continue;
            };
            if e.is_some_and(|e| e < now) {
                st.expired += 1;
                continue;
            }
            let db = self.db;
            let Some(d) = dbs.get_mut(db) else {
                return Err(corrupt("database index out of range"));
            };
            if d.can_append() {
                if !starts.iter().any(|&(i, _)| i == db) {
                    starts.push((db, d.len()));
                }
                append(d, key, v, e, now, lim)?;
            } else if !store(d, key, v, e, now, lim)? {
                return Err(duplicated(key, db));
            }
            st.keys += 1;
        }
        if st.version >= 5 {
            let expected = rd.crc();
            let got = u64::from_le_bytes(rd.array()?);
            if check_crc && got != 0 && got != expected {
                return Err(Error::Checksum { expected, got });
            }
        }
        self.done = true;
        Ok(true)
    }
}

fn duplicated(key: &[u8], db: usize) -> Error {
    corrupt(format!(
        "RDB has duplicated key '{}' in DB {db}",
        String::from_utf8_lossy(key)
    ))
}

/// Load a whole RDB stream into `dbs` (`rdbLoadRio`).
pub fn load<R: Read>(
    r: R,
    dbs: &mut [Db],
    lim: &Limits,
    now: i64,
    check_crc: bool,
) -> Result<LoadStats, Error> {
    let mut l = Loader::start(r)?;
    while !l.step(dbs, lim, now, check_crc, u64::MAX)? {}
    Ok(l.stats)
}

/// A RESTORE payload's value after Redis's checks (`verifyDumpPayload`):
/// at least 10 bytes, version ≤ ours, CRC64 right. `Ok(None)`: an empty
/// aggregate (RESTORE answers "Bad data format").
pub fn restore_payload(p: &[u8], lim: &Limits) -> Result<Option<Loaded>, Error> {
    if p.len() < 10 {
        return Err(Error::Checksum {
            expected: 0,
            got: 0,
        });
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let ver = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes([
        footer[2], footer[3], footer[4], footer[5], footer[6], footer[7], footer[8], footer[9],
    ]);
    if ver > RDB_VERSION {
        return Err(Error::Version(u32::from(ver)));
    }
    let want = crc64::crc64(0, &p[..p.len() - 8]);
    if crc != want {
        return Err(Error::Checksum {
            expected: want,
            got: crc,
        });
    }
    let mut rd = Reader::with_read_ahead(body, body.len());
    let t = rd.byte()?;
    value(&mut rd, t, lim)
}
