//! RDB persistence (Redis's `rdb.c`): the version-10 file format Redis
//! 7.0.15 writes and reads, so a gyre dump loads in redis-server and a
//! Redis dump loads in gyre; DUMP/RESTORE payloads share the value
//! serialization.
//!
//! * [`save`] — the writer: header, AUX fields, SELECTDB/RESIZEDB, key
//!   values in Redis 7.0's encodings, EOF and the CRC64 footer.
//! * [`load`] — the reader: every opcode of a 7.0 file and the older value
//!   encodings a 7.0 server still loads (ziplists, quicklist 1, zset with
//!   string scores); bounded by the file (a corrupt file is an error).
//! * [`blob`] — Redis's listpack / intset / ziplist byte layouts.
//! * [`resume`] — a large value's record written across many sweep slices.
//! * [`lzf`], [`crc64`] — string compression and the checksum.
//! * [`file`](mod@file) — crash-safe writing (temp file, fsync, rename, fsync dir).
//!
//! Value encodings written (Redis 7.0's): string 0 (int-encoded when the
//! text is a canonical integer of at most 11 bytes, LZF when longer than 20
//! bytes and `rdbcompression yes`); hash listpack 16 / hash 4; list
//! quicklist 18 with packed listpack nodes; set intset 11 / set 2 (7.0 has
//! no listpack sets); zset listpack 17 / zset_2 5 (binary doubles).
//! Streams and module types are refused with an error naming them.

pub mod blob;
pub mod crc64;
pub mod file;
pub mod load;
pub mod lzf;
pub(crate) mod resume;
pub mod save;

/// The RDB format version written (Redis 7.0).
pub const RDB_VERSION: u16 = 10;

// Value types (`RDB_TYPE_*`).
pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;

// Opcodes (`RDB_OPCODE_*`).
pub const OP_FUNCTION2: u8 = 245;
pub const OP_FUNCTION_PRE_GA: u8 = 246;
pub const OP_MODULE_AUX: u8 = 247;
pub const OP_IDLE: u8 = 248;
pub const OP_FREQ: u8 = 249;
pub const OP_AUX: u8 = 250;
pub const OP_RESIZEDB: u8 = 251;
pub const OP_EXPIRETIME_MS: u8 = 252;
pub const OP_EXPIRETIME: u8 = 253;
pub const OP_SELECTDB: u8 = 254;
pub const OP_EOF: u8 = 255;

// Special string encodings (`RDB_ENC_*`, after the 0b11 length prefix).
pub const ENC_INT8: u8 = 0;
pub const ENC_INT16: u8 = 1;
pub const ENC_INT32: u8 = 2;
pub const ENC_LZF: u8 = 3;

/// Quicklist node containers.
pub const QUICKLIST_PLAIN: u64 = 1;
pub const QUICKLIST_PACKED: u64 = 2;

/// Why a file or payload could not be read.
#[derive(Debug)]
pub enum Error {
    /// An I/O error other than running out of data.
    Io(std::io::Error),
    /// The data ended early (Redis: "Short read or OOM loading DB").
    Short,
    /// Not an RDB file ("Wrong signature trying to load DB from file").
    Signature,
    /// A version this reader does not handle.
    Version(u32),
    /// The CRC64 footer does not match.
    Checksum { expected: u64, got: u64 },
    /// A value that cannot be right (bad type, bad blob, bad length...).
    Corrupt(String),
    /// A well-formed value of a type gyre does not store.
    Unsupported(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Short => {
                f.write_str("Short read or OOM loading DB. Unrecoverable error, aborting now.")
            }
            Error::Signature => f.write_str("Wrong signature trying to load DB from file"),
            Error::Version(v) => write!(f, "Can't handle RDB format version {v}"),
            Error::Checksum { expected, got } => write!(
                f,
                "Wrong RDB checksum expected: ({expected:x}) got ({got:x}). Aborting now."
            ),
            Error::Corrupt(m) => write!(f, "Internal error in RDB reading: {m}"),
            Error::Unsupported(m) => write!(f, "{m}"),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::Short
        } else {
            Error::Io(e)
        }
    }
}

#[cfg(test)]
mod tests;
