//! Redis 7.0's multi-part AOF manifest (`aof.c`'s `aofManifest`): which
//! files make up the append-only file, in a text file beside them
//! (`appendonly.aof.manifest`):
//!
//! ```text
//! file appendonly.aof.1.base.rdb seq 1 type b
//! file appendonly.aof.1.incr.aof seq 1 type i
//! ```
//!
//! One base (`b`: an RDB or a command file written by a rewrite), then the
//! incremental files (`i`) in order, and history files (`h`) a finished
//! rewrite replaced, removed after the new manifest is on disk. Names are
//! `<appendfilename>.<seq>.base.rdb|aof` and `<appendfilename>.<seq>.incr.aof`.

use std::io::{self, Write};
use std::path::Path;

/// One file of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofInfo {
    pub name: String,
    pub seq: u64,
    pub kind: FileKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Base,
    Incr,
    History,
}

impl FileKind {
    fn letter(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::Incr => 'i',
            FileKind::History => 'h',
        }
    }
}

/// The manifest in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofInfo>,
    pub incrs: Vec<AofInfo>,
    pub history: Vec<AofInfo>,
    /// Highest sequence numbers used.
    pub curr_base_seq: u64,
    pub curr_incr_seq: u64,
}

pub const BASE_SUFFIX: &str = ".base";
pub const INCR_SUFFIX: &str = ".incr";
pub const RDB_EXT: &str = ".rdb";
pub const AOF_EXT: &str = ".aof";
pub const MANIFEST_SUFFIX: &str = ".manifest";
pub const TEMP_PREFIX: &str = "temp-";

/// Redis's `aofLoadManifestFromFile` errors, with its texts.
pub fn parse(text: &str) -> Result<Manifest, String> {
    let mut m = Manifest::default();
    let mut lines = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        lines += 1;
        let w = split_args(line).ok_or("Invalid AOF manifest file format")?;
        if w.len() < 6 || w.len() % 2 != 0 {
            return Err("Invalid AOF manifest file format".into());
        }
        let (mut name, mut seq, mut kind) = (None, None, None);
        for p in w.chunks(2) {
            match p[0].as_str() {
                "file" => name = Some(p[1].clone()),
                "seq" => seq = p[1].parse::<u64>().ok(),
                "type" => {
                    kind = match p[1].as_str() {
                        "b" => Some(FileKind::Base),
                        "i" => Some(FileKind::Incr),
                        "h" => Some(FileKind::History),
                        _ => None,
                    }
                }
                // Unknown fields are skipped (forward compatibility).
                _ => {}
            }
        }
        let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
            return Err("Invalid AOF manifest file format".into());
        };
        let info = AofInfo { name, seq, kind };
        match kind {
            FileKind::Base => {
                if m.base.is_some() {
                    return Err("Found duplicate base file information".into());
                }
                m.curr_base_seq = seq;
                m.base = Some(info);
            }
            FileKind::History => m.history.push(info),
            FileKind::Incr => {
                if seq <= m.curr_incr_seq {
                    return Err("Found a non-monotonic sequence number".into());
                }
                m.curr_incr_seq = seq;
                m.incrs.push(info);
            }
        }
    }
    if lines == 0 {
        return Err("Found an empty AOF manifest".into());
    }
    Ok(m)
}

/// Split a manifest line: words, a word may be quoted (`"a b"`) as
/// Redis's `sdssplitargs` allows.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else {
            return Some(out);
        };
        let mut w = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => w.push(chars.next()?),
                    c => w.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                w.push(c);
                chars.next();
            }
        }
        out.push(w);
    }
}

/// A file name as the manifest writes it (quoted when it has spaces).
fn quoted(name: &str) -> String {
    if name
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\\')
    {
        let mut s = String::from("\"");
        for c in name.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
        s
    } else {
        name.to_string()
    }
}

impl Manifest {
    /// Redis's `getAofManifestAsString`: base, history, then incrs.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let mut line = |i: &AofInfo| {
            s.push_str(&format!(
                "file {} seq {} type {}\n",
                quoted(&i.name),
                i.seq,
                i.kind.letter()
            ));
        };
        if let Some(b) = &self.base {
            line(b);
        }
        for h in &self.history {
            line(h);
        }
        for i in &self.incrs {
            line(i);
        }
        s
    }

    /// A new base name for a rewrite (`getNewBaseFileNameAndMarkPreAsHistory`):
    /// the old base becomes history.
    pub fn new_base(&mut self, filename: &str, rdb: bool) -> String {
        if let Some(mut b) = self.base.take() {
            b.kind = FileKind::History;
            self.history.push(b);
        }
        self.curr_base_seq += 1;
        let name = format!(
            "{filename}.{}{BASE_SUFFIX}{}",
            self.curr_base_seq,
            if rdb { RDB_EXT } else { AOF_EXT }
        );
        self.base = Some(AofInfo {
            name: name.clone(),
            seq: self.curr_base_seq,
            kind: FileKind::Base,
        });
        name
    }

    /// A new incremental file (`getNewIncrAofName`).
    pub fn new_incr(&mut self, filename: &str) -> String {
        self.curr_incr_seq += 1;
        let name = format!("{filename}.{}{INCR_SUFFIX}{AOF_EXT}", self.curr_incr_seq);
        self.incrs.push(AofInfo {
            name: name.clone(),
            seq: self.curr_incr_seq,
            kind: FileKind::Incr,
        });
        name
    }

    /// After a rewrite (`markRewrittenIncrAofAsHistory`): every incr file
    /// but the last (the one written during the rewrite) becomes history.
    pub fn mark_rewritten_incrs_history(&mut self) {
        let keep = self.incrs.pop();
        for mut i in self.incrs.drain(..) {
            i.kind = FileKind::History;
            self.history.push(i);
        }
        self.incrs.extend(keep);
    }

    /// The name of the last incremental file.
    pub fn last_incr(&self) -> Option<&str> {
        self.incrs.last().map(|i| i.name.as_str())
    }
}

/// Write the manifest crash-safely (`writeAofManifestFile`): a temp file,
/// fsync, rename, directory fsync.
pub fn persist(dir: &Path, filename: &str, m: &Manifest) -> io::Result<()> {
    let name = format!("{filename}{MANIFEST_SUFFIX}");
    let tmp = dir.join(format!("{TEMP_PREFIX}{name}"));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(m.to_text().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(&name))?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_prints_redis_manifest() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let m = parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "appendonly.aof.1.base.rdb");
        assert_eq!(m.incrs.len(), 1);
        assert_eq!(m.to_text(), text);
    }

    #[test]
    fn rejects_bad_manifests_with_redis_texts() {
        assert_eq!(parse("").unwrap_err(), "Found an empty AOF manifest");
        assert_eq!(
            parse("file a seq 1 type b\nfile b seq 2 type b\n").unwrap_err(),
            "Found duplicate base file information"
        );
        assert_eq!(
            parse("file a seq 2 type i\nfile b seq 1 type i\n").unwrap_err(),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            parse("file a seq 1\n").unwrap_err(),
            "Invalid AOF manifest file format"
        );
    }

    #[test]
    fn a_rewrite_moves_old_files_to_history() {
        let mut m = Manifest::default();
        m.new_base("appendonly.aof", true);
        m.new_incr("appendonly.aof");
        m.new_incr("appendonly.aof");
        let b = m.new_base("appendonly.aof", true);
        assert_eq!(b, "appendonly.aof.2.base.rdb");
        m.mark_rewritten_incrs_history();
        assert_eq!(
            m.to_text(),
            "file appendonly.aof.2.base.rdb seq 2 type b\n\
             file appendonly.aof.1.base.rdb seq 1 type h\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        assert_eq!(parse(&m.to_text()).unwrap(), {
            let mut p = m.clone();
            p.curr_base_seq = 2;
            p
        });
    }
}
