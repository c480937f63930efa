//! Loading the append-only file at start (Redis's `loadAppendOnlyFiles`
//! and `loadSingleAppendOnlyFile`), and opening it for appending
//! (`aofOpenIfNeededOnServerStart`).
//!
//! The manifest names the base (an RDB, or commands) and the incremental
//! files. An RDB base is read in slices by the RDB loader; then the
//! command files are replayed in order through the command table, as by a
//! client with no connection (no propagation: the AOF is not yet open),
//! [`AOF_LOAD_SLICE_CMDS`] commands per slice, streamed from the file in
//! [`READ_CHUNK`] reads (memory: the largest command, not the file). The
//! loop serves clients between slices, as Redis's
//! `processEventsWhileBlocked` every 1024 commands: they get `-LOADING`,
//! INFO shows `loading:1` and the progress over all the files.
//! A MULTI … EXEC is executed at its EXEC, so a transaction torn at the
//! end is not half applied. A file that ends inside a command is a
//! truncated AOF: with `aof-load-truncated yes` and in the last file, it
//! is cut back to the last complete command with Redis's log lines;
//! otherwise, as any malformed or unknown command, the start stops with
//! Redis's message (never a silently empty dataset).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Instant;

use super::manifest::{self, Manifest};
use super::AofStatus;
use crate::cmd::Ctx;
use crate::resp::Argv;
use crate::server::Server;

/// Commands replayed per loading slice (Redis serves clients every 1024
/// commands while it loads an AOF).
pub const AOF_LOAD_SLICE_CMDS: usize = 1024;
/// Bytes read from a command file at a time.
const READ_CHUNK: usize = 1024 * 1024;

/// An AOF being loaded: the files after the RDB base.
#[derive(Debug)]
pub struct AofLoad {
    manifest: Manifest,
    files: Vec<(String, bool)>,
    /// The next of `files` to open.
    next: usize,
    /// The command file being replayed.
    replay: Option<Replay>,
    base_rdb: Option<String>,
    base_size: u64,
    /// Bytes of the files loaded so far (`aof_current_size` at the end).
    total: u64,
    /// Bytes of every file, for INFO's `loading_total_bytes`.
    pub(crate) total_bytes: u64,
    pub(crate) started: Instant,
    pub(crate) started_ms: i64,
}

impl AofLoad {
    /// INFO's `loading_loaded_bytes`: the finished files and the position
    /// in the current one (an RDB base or preamble: the RDB loader's).
    pub(crate) fn loaded_bytes(&self, rdb_offset: Option<u64>) -> u64 {
        let cur = match (&self.replay, rdb_offset) {
            (Some(r), Some(o)) if r.preamble => o,
            (Some(r), _) => r.off + r.pos as u64,
            (None, o) => o.unwrap_or(0),
        };
        self.total + cur
    }
}

/// A command file being replayed, streamed.
#[derive(Debug)]
struct Replay {
    name: String,
    path: PathBuf,
    is_base: bool,
    /// The last file (the only one `aof-load-truncated` may cut).
    last: bool,
    file: File,
    /// Bytes read and not yet consumed start at `buf[pos]`; `buf[0]` is
    /// at file offset `off`.
    buf: Vec<u8>,
    pos: usize,
    off: u64,
    eof: bool,
    /// An RDB preamble (an old single-file AOF) is being loaded by the
    /// RDB loader first.
    preamble: bool,
    db: usize,
    /// An open MULTI: its file offset and the commands queued.
    multi: Option<(u64, Vec<Vec<Vec<u8>>>)>,
    started: Instant,
}

impl Replay {
    /// Read more of the file; false at its end.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.off += self.pos as u64;
            self.pos = 0;
        }
        let have = self.buf.len();
        self.buf.resize(have + READ_CHUNK, 0);
        let n = loop {
            match self.file.read(&mut self.buf[have..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                self.buf.truncate(have);
                return Err(e);
            }
        };
        self.buf.truncate(have + n);
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// File offset of `buf[i]`.
    fn at(&self, i: usize) -> u64 {
        self.off + i as u64
    }
}

/// How one command file ended.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    Clean,
    /// Torn at this offset (the last complete command ends there);
    /// `multi`: the tear is inside a MULTI that started at the offset.
    Truncated {
        valid: u64,
        multi: bool,
    },
}

/// A parsed command and the offset after it.
type Parsed = (Vec<Vec<u8>>, usize);

/// Parse one RESP command at `pos`: `Ok(None)` when the data ends first.
fn parse_command(b: &[u8], mut pos: usize) -> Result<Option<Parsed>, ()> {
    fn line(b: &[u8], pos: usize) -> Option<(&[u8], usize)> {
        let end = b[pos..].windows(2).position(|w| w == b"\r\n")?;
        Some((&b[pos..pos + end], pos + end + 2))
    }
    let Some((l, next)) = line(b, pos) else {
        return Ok(None);
    };
    if l.first() != Some(&b'*') {
        return Err(());
    }
    let argc = crate::util::string2ll(&l[1..])
        .filter(|&n| n >= 1)
        .ok_or(())?;
    pos = next;
    let mut argv = Vec::with_capacity(argc.min(1024) as usize);
    for _ in 0..argc {
        let Some((l, next)) = line(b, pos) else {
            return Ok(None);
        };
        if l.first() != Some(&b'$') {
            return Err(());
        }
        let len = crate::util::string2ll(&l[1..])
            .filter(|&n| n >= 0)
            .ok_or(())? as usize;
        if next + len + 2 > b.len() {
            return Ok(None);
        }
        if &b[next + len..next + len + 2] != b"\r\n" {
            return Err(());
        }
        argv.push(b[next..next + len].to_vec());
        pos = next + len + 2;
    }
    Ok(Some((argv, pos)))
}

fn is(a: &[u8], name: &str) -> bool {
    a.eq_ignore_ascii_case(name.as_bytes())
}

impl Server {
    /// Run one command from the AOF (the fake client of
    /// `loadSingleAppendOnlyFile`).
    fn aof_replay(
        &mut self,
        db: &mut usize,
        argv: &[Vec<u8>],
        now_ms: i64,
        name: &str,
    ) -> Result<(), String> {
        let mut buf = Vec::new();
        let mut spans = Vec::with_capacity(argv.len());
        for a in argv {
            let s = buf.len();
            buf.extend_from_slice(a);
            spans.push((s, buf.len()));
        }
        let args = Argv::new(&buf, &spans);
        let cmd = match self.lookup_command(args) {
            Ok(c) => c,
            Err(_) => {
                return Err(format!(
                    "Unknown command '{}' reading the append only file {name}",
                    String::from_utf8_lossy(&argv[0])
                ))
            }
        };
        let mut out = Vec::new();
        let mut ctx = Ctx {
            argv: args,
            now: now_ms,
            out: &mut out,
            client_id: 0,
            db: *db,
            proto: 2,
            close: false,
            errors: 0,
            resync: false,
            deny_blocking: true,
        };
        (cmd.spec.handler)(self, &mut ctx);
        *db = ctx.db;
        self.settle_dbs(*db, *db, true);
        Ok(())
    }

    /// Replay up to `max` commands of the current file; `Ok(None)` when
    /// the slice ended before the file did.
    fn aof_replay_slice(
        &mut self,
        r: &mut Replay,
        now_ms: i64,
        max: usize,
    ) -> Result<Option<Ending>, String> {
        let name = r.name.clone();
        let bad = || {
            format!("Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>")
        };
        let io_err = |e: std::io::Error| {
            format!("Unrecoverable error reading the append only file {name}: {e}")
        };
        let mut done = 0;
        while done < max {
            if r.pos >= r.buf.len() && !r.fill().map_err(io_err)? {
                break;
            }
            if r.buf[r.pos] == b'#' {
                // An annotation (`#TS:...`): skip the line.
                match r.buf[r.pos..].windows(2).position(|w| w == b"\r\n") {
                    Some(e) => {
                        r.pos += e + 2;
                        continue;
                    }
                    None if r.fill().map_err(io_err)? => continue,
                    None => {
                        return Ok(Some(Ending::Truncated {
                            valid: r.at(r.pos),
                            multi: false,
                        }))
                    }
                }
            }
            let start = r.at(r.pos);
            let argv = match parse_command(&r.buf, r.pos) {
                Ok(Some((argv, next))) => {
                    r.pos = next;
                    argv
                }
                Ok(None) if r.fill().map_err(io_err)? => continue,
                Ok(None) => {
                    return Ok(Some(match r.multi.take() {
                        Some((m, _)) => Ending::Truncated {
                            valid: m,
                            multi: true,
                        },
                        None => Ending::Truncated {
                            valid: start,
                            multi: false,
                        },
                    }))
                }
                Err(()) => return Err(bad()),
            };
            done += 1;
            if is(&argv[0], "multi") {
                r.multi = Some((start, Vec::new()));
                continue;
            }
            if is(&argv[0], "exec") {
                if let Some((_, q)) = r.multi.take() {
                    for c in q {
                        self.aof_replay(&mut r.db, &c, now_ms, &name)?;
                    }
                }
                continue;
            }
            match r.multi.as_mut() {
                Some((_, q)) => q.push(argv),
                None => self.aof_replay(&mut r.db, &argv, now_ms, &name)?,
            }
        }
        if done < max {
            // The file ended.
            return Ok(Some(match r.multi.take() {
                Some((m, _)) => Ending::Truncated {
                    valid: m,
                    multi: true,
                },
                None => Ending::Clean,
            }));
        }
        Ok(None)
    }

    /// Open command file `name` for replaying; an RDB preamble (an old
    /// single-file AOF) goes to the RDB loader first.
    fn aof_replay_open(
        &mut self,
        name: &str,
        is_base: bool,
        last: bool,
        now_ms: i64,
    ) -> Result<Replay, String> {
        let path = self.aof_dir().join(name);
        let open_err =
            |e| format!("Fatal error: can't open the append log file {name} for reading: {e}");
        let file = File::open(&path).map_err(open_err)?;
        let mut r = Replay {
            name: name.to_string(),
            path: path.clone(),
            is_base,
            last,
            file,
            buf: Vec::new(),
            pos: 0,
            off: 0,
            eof: false,
            preamble: false,
            db: 0,
            multi: None,
            started: Instant::now(),
        };
        while r.buf.len() < 5 && r.fill().map_err(&open_err)? {}
        if r.buf.starts_with(b"REDIS") {
            log::info!("Reading RDB preamble from AOF file...");
            let f = File::open(&path).map_err(open_err)?;
            let size = f.metadata().map_or(0, |m| m.len());
            let loader =
                crate::rdb::load::Loader::start(std::io::BufReader::with_capacity(256 * 1024, f))
                    .map_err(|e| {
                        format!("Error reading the RDB preamble of the AOF file {name}, AOF loading aborted: {e}")
                    })?
                    .with_size(size);
            self.persist.loading = Some(crate::persist::Loading {
                loader,
                total_bytes: size,
                started: Instant::now(),
                started_ms: now_ms,
                of_aof: true,
            });
            r.preamble = true;
        }
        Ok(r)
    }

    /// The RDB preamble of the file being replayed was loaded: go on with
    /// the commands after it.
    fn aof_preamble_done(&mut self, r: &mut Replay) -> Result<(), String> {
        let end = self.persist.last_load_offset;
        r.preamble = false;
        r.buf.clear();
        r.pos = 0;
        r.off = end;
        r.file.seek(SeekFrom::Start(end)).map_err(|e| {
            format!(
                "Unrecoverable error reading the append only file {}: {e}",
                r.name
            )
        })?;
        log::info!("Reading the remaining AOF tail...");
        Ok(())
    }

    /// A command file was replayed to its end: a torn tail is cut when
    /// allowed, with Redis's log lines; its size is counted.
    fn aof_replay_finish(&mut self, r: &Replay, ending: Ending) -> Result<u64, String> {
        let name = &r.name;
        if let Ending::Truncated { valid, multi } = ending {
            if !r.last || !self.config.persist.aof.load_truncated {
                return Err(format!("Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."));
            }
            if multi {
                log::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
            } else {
                log::warn!("!!! Warning: short read while loading the AOF file {name}!!!");
            }
            log::warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
            let t = std::fs::OpenOptions::new()
                .write(true)
                .open(&r.path)
                .and_then(|f| f.set_len(valid).and_then(|()| f.sync_all()));
            if let Err(e) = t {
                return Err(format!("Error truncating the AOF file {name}: {e}"));
            }
            log::warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
        }
        log::info!(
            "DB loaded from {} file {name}: {:.3} seconds",
            if r.is_base { "base" } else { "incr" },
            r.started.elapsed().as_secs_f64()
        );
        Ok(std::fs::metadata(&r.path).map_or(0, |m| m.len()))
    }

    /// The manifest on disk (`aofLoadManifestFromDisk`), if any.
    pub(crate) fn aof_read_manifest(&self) -> Result<Option<Manifest>, String> {
        let filename = &self.config.persist.aof.appendfilename;
        let mpath = self
            .aof_dir()
            .join(format!("{filename}{}", manifest::MANIFEST_SUFFIX));
        let text = match std::fs::read_to_string(&mpath) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "Fatal error: can't open the AOF manifest {} for reading: {e}",
                    mpath.display()
                ))
            }
        };
        manifest::parse(&text).map(Some)
    }

    /// An old single-file AOF (`dir/appendonly.aof`, Redis before 7.0)
    /// becomes the base of a multi-part AOF (`aofUpgradePrepare`): moved
    /// into the AOF directory under its name, with a manifest.
    fn aof_upgrade(&mut self) -> Result<Option<Manifest>, String> {
        let filename = self.config.persist.aof.appendfilename.clone();
        let old = self.config.persist.dir.join(&filename);
        if !old.is_file() {
            return Ok(None);
        }
        let dir = self.aof_dir();
        let r =
            std::fs::create_dir_all(&dir).and_then(|()| std::fs::rename(&old, dir.join(&filename)));
        if let Err(e) = r {
            return Err(format!(
                "Error moving the old AOF file {filename} into the AOF directory: {e}"
            ));
        }
        let m = Manifest {
            base: Some(manifest::AofInfo {
                name: filename.clone(),
                seq: 1,
                kind: manifest::FileKind::Base,
            }),
            curr_base_seq: 1,
            ..Manifest::default()
        };
        manifest::persist(&dir, &filename, &m)
            .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
        log::info!(
            "Successfully migrated an old-style AOF into the AOF directory {}.",
            self.config.persist.aof.appenddirname
        );
        Ok(Some(m))
    }

    /// Start loading the AOF named by the manifest (`loadAppendOnlyFiles`).
    /// `Ok(false)`: there is no AOF yet (an empty dataset, as Redis: with
    /// `appendonly yes` the RDB file is not read). `Err`: the start must
    /// stop, with the message to log. The loading itself is
    /// [`Server::aof_load_slice`]'s, called until it returns `Ok(true)`.
    pub fn aof_load_begin(&mut self, now_ms: i64) -> Result<bool, String> {
        let dir = self.aof_dir();
        let m = match self.aof_read_manifest()? {
            Some(m) => m,
            None => match self.aof_upgrade()? {
                Some(m) => m,
                None => return Ok(false),
            },
        };
        let mut files: Vec<(String, bool)> = Vec::new();
        if let Some(b) = &m.base {
            files.push((b.name.clone(), true));
        }
        files.extend(m.incrs.iter().map(|i| (i.name.clone(), false)));
        for (name, _) in &files {
            if !dir.join(name).exists() {
                return Err(format!("The AOF file {name} doesn't exist"));
            }
        }
        let total_bytes = files
            .iter()
            .map(|(n, _)| std::fs::metadata(dir.join(n)).map_or(0, |m| m.len()))
            .sum();
        let mut base_size = 0;
        let mut base_rdb = None;
        if let Some((name, true)) = files.first() {
            if name.ends_with(manifest::RDB_EXT) {
                log::info!("Reading RDB base file on AOF loading...");
                let f = std::fs::File::open(dir.join(name)).map_err(|e| {
                    format!("Fatal error: can't open the append log file {name} for reading: {e}")
                })?;
                let size = f.metadata().map_or(0, |x| x.len());
                let loader = crate::rdb::load::Loader::start(std::io::BufReader::with_capacity(
                    256 * 1024,
                    f,
                ))
                .map_err(|e| {
                    format!("Error reading the RDB base file {name}, AOF loading aborted: {e}")
                })?
                .with_size(size);
                self.persist.loading = Some(crate::persist::Loading {
                    loader,
                    total_bytes: size,
                    started: Instant::now(),
                    started_ms: now_ms,
                    of_aof: true,
                });
                base_size = size;
                base_rdb = Some(name.clone());
                files.remove(0);
            }
        }
        self.aof.loading = Some(AofLoad {
            manifest: m,
            files,
            next: 0,
            replay: None,
            base_rdb,
            base_size,
            total: 0,
            total_bytes,
            started: Instant::now(),
            started_ms: now_ms,
        });
        Ok(true)
    }

    /// One loading slice (a slice of the RDB base or preamble, or
    /// [`AOF_LOAD_SLICE_CMDS`] commands); `Ok(true)` when the AOF is
    /// loaded and open for appending.
    pub fn aof_load_slice(&mut self, now_ms: i64) -> Result<bool, String> {
        let Some(mut l) = self.aof.loading.take() else {
            return Ok(true);
        };
        let r = self.aof_load_step(&mut l, now_ms);
        match r {
            Ok(false) => {
                self.aof.loading = Some(l);
                Ok(false)
            }
            Ok(true) => {
                self.aof.manifest = std::mem::take(&mut l.manifest);
                self.aof.current_size = l.total;
                self.aof.base_size = l.total;
                self.dirty = 0;
                log::info!(
                    "DB loaded from append only file: {:.3} seconds",
                    l.started.elapsed().as_secs_f64()
                );
                self.aof_open_at_start(now_ms)?;
                self.sync_propagation();
                Ok(true)
            }
            Err(e) => {
                self.persist.loading = None;
                Err(e)
            }
        }
    }

    /// [`Server::aof_load_slice`]'s work on the load `l` (taken out of
    /// the server while commands run); `Ok(true)` once every file is in.
    fn aof_load_step(&mut self, l: &mut AofLoad, now_ms: i64) -> Result<bool, String> {
        if self.persist.loading.is_some() {
            let preamble = l.replay.as_ref().is_some_and(|r| r.preamble);
            let what = if preamble {
                "the RDB preamble of the AOF file"
            } else {
                "the RDB base file"
            };
            let name = match &l.replay {
                Some(r) => r.name.clone(),
                None => l.base_rdb.clone().unwrap_or_default(),
            };
            match self.load_slice(now_ms) {
                Ok(false) => return Ok(false),
                Ok(true) if preamble => {}
                Ok(true) => {
                    log::info!("RDB is base AOF");
                    l.total += l.base_size;
                }
                Err(e) => {
                    return Err(format!(
                        "Error reading {what} {name}, AOF loading aborted: {e}"
                    ))
                }
            }
            if let Some(mut r) = l.replay.take() {
                let done = self.aof_preamble_done(&mut r);
                l.replay = Some(r);
                done?;
            }
            return Ok(false);
        }
        let mut r = match l.replay.take() {
            Some(r) => r,
            None => {
                let Some((name, is_base)) = l.files.get(l.next).cloned() else {
                    return Ok(true);
                };
                let last = l.next + 1 == l.files.len();
                l.next += 1;
                let r = self.aof_replay_open(&name, is_base, last, now_ms)?;
                if r.preamble {
                    l.replay = Some(r);
                    return Ok(false);
                }
                r
            }
        };
        match self.aof_replay_slice(&mut r, now_ms, AOF_LOAD_SLICE_CMDS) {
            Ok(None) => {
                l.replay = Some(r);
                Ok(false)
            }
            Ok(Some(ending)) => {
                l.total += self.aof_replay_finish(&r, ending)?;
                Ok(l.next >= l.files.len())
            }
            Err(e) => Err(e),
        }
    }

    /// Open the AOF for appending at start
    /// (`aofOpenIfNeededOnServerStart`): a first base (of the loaded, or
    /// empty, dataset) and a first incremental file when there are none.
    pub fn aof_open_at_start(&mut self, now_ms: i64) -> Result<(), String> {
        if self.aof.status != AofStatus::On {
            return Ok(());
        }
        let dir = self.aof_dir();
        let filename = self.config.persist.aof.appendfilename.clone();
        std::fs::create_dir_all(&dir).map_err(|e| {
            format!(
                "Can't open or create append-only dir {}: {e}",
                dir.display()
            )
        })?;
        let mut m: Manifest = self.aof.manifest.clone();
        let mut changed = false;
        if m.base.is_none() && m.incrs.is_empty() {
            let rdb = self.config.persist.aof.use_rdb_preamble;
            let name = m.new_base(&filename, rdb);
            let path = dir.join(&name);
            let r = if rdb {
                self.rdb_save_to(&path, true, now_ms).map(|_| ())
            } else {
                // An empty dataset as commands is an empty file.
                std::fs::File::create(&path).and_then(|f| f.sync_all())
            };
            r.map_err(|e| format!("Can't create the AOF base file {name}: {e}"))?;
            self.aof.base_size = std::fs::metadata(&path).map_or(0, |x| x.len());
            self.aof.current_size = self.aof.base_size;
            log::info!("Creating AOF base file {name} on server start");
            changed = true;
        }
        let incr = match m.last_incr() {
            Some(n) => {
                log::info!("Opening AOF incr file {n} on server start");
                n.to_string()
            }
            None => {
                let n = m.new_incr(&filename);
                log::info!("Creating AOF incr file {n} on server start");
                changed = true;
                n
            }
        };
        if changed {
            manifest::persist(&dir, &filename, &m)
                .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
        }
        self.aof.manifest = m;
        let f = self
            .aof_open_incr(&incr, false)
            .map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
        let size = f.metadata().map_or(0, |x| x.len());
        self.aof.file = Some(f);
        self.aof.incr_size = size;
        self.aof.fsync_offset = size;
        self.aof.selected_db = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn server_in(dir: &std::path::Path) -> Server {
        let mut config = crate::server::Config::default();
        config.persist.dir = dir.to_path_buf();
        config.persist.aof.appendonly = true;
        let mut s = Server::new(config, 1_000);
        s.aof.status = AofStatus::On;
        s
    }

    fn run(s: &mut Server, args: &[&str]) -> String {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let mut out = Vec::new();
        s.execute(0, &argv, 2_000, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn the_rdb_base_loads_in_slices_answering_loading_then_the_incr_files() {
        let dir = std::env::temp_dir().join(format!("gyre-aof-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = server_in(&dir);
        let n = 3 * crate::persist::LOAD_SLICE_KEYS;
        for i in 0..n {
            a.dbs[0].set(format!("k{i}").as_bytes(), b"v".to_vec(), false);
        }
        // The first base holds the dataset; the SET goes to the incr file.
        a.aof_open_at_start(2_000).unwrap();
        a.sync_propagation();
        assert_eq!(run(&mut a, &["SET", "k1", "new"]), "+OK\r\n");
        a.aof_flush(true, 2_000);
        drop(a);
        let mut b = server_in(&dir);
        assert!(b.aof_load_begin(3_000).unwrap());
        assert_eq!(
            run(&mut b, &["GET", "k1"]),
            "-LOADING Redis is loading the dataset in memory\r\n"
        );
        assert!(run(&mut b, &["INFO", "persistence"]).contains("loading:1\r\n"));
        let mut slices = 0;
        while !b.aof_load_slice(3_000).unwrap() {
            slices += 1;
            assert!(slices < 1000);
        }
        assert!(slices >= 2, "{slices} slices");
        assert_eq!(run(&mut b, &["GET", "k1"]), "$3\r\nnew\r\n");
        assert_eq!(run(&mut b, &["DBSIZE"]), format!(":{n}\r\n"));
        assert!(run(&mut b, &["INFO", "persistence"]).contains("loading:0\r\n"));
        // Open for appending again: a write reaches the same incr file.
        assert_eq!(run(&mut b, &["SET", "k2", "x"]), "+OK\r\n");
        b.aof_flush(true, 3_000);
        let incr = std::fs::read(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
        assert!(incr.ends_with(b"$2\r\nk2\r\n$1\r\nx\r\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn info_field(s: &mut Server, name: &str) -> Option<u64> {
        let info = run(s, &["INFO", "persistence"]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gyre-aof-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Replays `b` to the end, checking what clients see between slices;
    /// the number of slices.
    fn load_in_slices(b: &mut Server) -> usize {
        assert!(b.aof_load_begin(3_000).unwrap());
        let total = info_field(b, "loading_total_bytes").unwrap();
        let mut last = 0;
        let mut slices = 0;
        while !b.aof_load_slice(3_000).unwrap() {
            slices += 1;
            assert!(slices < 100_000);
            // Served between slices, as Redis's processEventsWhileBlocked.
            assert_eq!(
                run(b, &["GET", "k1"]),
                "-LOADING Redis is loading the dataset in memory\r\n"
            );
            assert_eq!(info_field(b, "loading"), Some(1));
            let loaded = info_field(b, "loading_loaded_bytes").unwrap();
            assert!(loaded >= last && loaded <= total, "{last} {loaded} {total}");
            assert_eq!(info_field(b, "loading_total_bytes"), Some(total));
            last = loaded;
        }
        assert_eq!(info_field(b, "loading"), Some(0));
        assert_eq!(info_field(b, "loading_total_bytes"), None);
        slices
    }

    #[test]
    fn a_big_incr_file_replays_in_slices_streamed_and_a_torn_tail_is_cut() {
        let dir = tmp("replay");
        let mut a = server_in(&dir);
        a.config.persist.aof.use_rdb_preamble = false;
        a.aof_open_at_start(2_000).unwrap();
        a.sync_propagation();
        // Over 5 slices of commands and over two READ_CHUNKs of bytes, so
        // commands straddle the reads.
        let n = 5 * AOF_LOAD_SLICE_CMDS + 17;
        let val = "v".repeat(500);
        for i in 0..n {
            assert_eq!(run(&mut a, &["SET", &format!("k{i}"), &val]), "+OK\r\n");
        }
        a.aof_flush(true, 2_000);
        drop(a);
        let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
        // A transaction as Redis writes one, changing the database inside.
        let mut t = Vec::new();
        for c in [
            &[&b"MULTI"[..]][..],
            &[b"INCR", b"counter"],
            &[b"SELECT", b"3"],
            &[b"SET", b"in3", b"x"],
            &[b"EXEC"],
        ] {
            super::super::propagate::cat_command(&mut t, c);
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&incr)
            .unwrap();
        std::io::Write::write_all(&mut f, &t).unwrap();
        drop(f);
        let clean = std::fs::metadata(&incr).unwrap().len();
        assert!(clean > 2 * READ_CHUNK as u64);
        // A torn command at the end.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&incr)
            .unwrap();
        std::io::Write::write_all(&mut f, b"*3\r\n$3\r\nSET\r\n$4\r\ntorn\r\n$5\r\nab").unwrap();
        drop(f);
        let mut b = server_in(&dir);
        let slices = load_in_slices(&mut b);
        assert!(slices >= 5, "{slices} slices");
        assert_eq!(std::fs::metadata(&incr).unwrap().len(), clean);
        assert_eq!(b.dbs[0].len(), n + 1);
        assert_eq!(run(&mut b, &["GET", "counter"]), "$1\r\n1\r\n");
        assert_eq!(run(&mut b, &["GET", "torn"]), "$-1\r\n");
        assert_eq!(
            run(&mut b, &["GET", &format!("k{}", n - 1)]),
            format!("${}\r\n{val}\r\n", val.len())
        );
        assert_eq!(b.dbs[3].len(), 1);
        // Without aof-load-truncated the same tear stops the start.
        drop(b);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&incr)
            .unwrap();
        std::io::Write::write_all(&mut f, b"*1\r\n$4\r\nPI").unwrap();
        drop(f);
        let mut c = server_in(&dir);
        c.config.persist.aof.load_truncated = false;
        assert!(c.aof_load_begin(3_000).unwrap());
        let err = loop {
            match c.aof_load_slice(3_000) {
                Ok(false) => {}
                Ok(true) => panic!("loaded a torn file"),
                Err(e) => break e,
            }
        };
        assert!(
            err.starts_with(
                "Unexpected end of file reading the append only file appendonly.aof.1.incr.aof"
            ),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_old_aof_with_an_rdb_preamble_loads_in_slices_then_its_tail() {
        let dir = tmp("preamble");
        let mut a = server_in(&dir);
        let n = 3 * crate::persist::LOAD_SLICE_KEYS;
        for i in 0..n {
            a.dbs[0].set(format!("k{i}").as_bytes(), b"v".to_vec(), false);
        }
        let old = dir.join("appendonly.aof");
        a.rdb_save_to(&old, true, 2_000).unwrap();
        let mut tail = Vec::new();
        for i in 0..(2 * AOF_LOAD_SLICE_CMDS) {
            let k = format!("t{i}");
            super::super::propagate::cat_command(&mut tail, &[b"SET", k.as_bytes(), b"w"]);
        }
        super::super::propagate::cat_command(&mut tail, &[b"SET", b"k1", b"tail"]);
        let mut f = std::fs::OpenOptions::new().append(true).open(&old).unwrap();
        std::io::Write::write_all(&mut f, &tail).unwrap();
        drop(f);
        let mut b = server_in(&dir);
        let slices = load_in_slices(&mut b);
        assert!(slices >= 4, "{slices} slices");
        assert_eq!(
            run(&mut b, &["DBSIZE"]),
            format!(":{}\r\n", n as usize + 2 * AOF_LOAD_SLICE_CMDS)
        );
        assert_eq!(run(&mut b, &["GET", "k1"]), "$4\r\ntail\r\n");
        assert!(dir.join("appendonlydir/appendonly.aof").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn parses_commands_and_detects_a_tear() {
        let b = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPI";
        let (argv, next) = parse_command(b, 0).unwrap().unwrap();
        assert_eq!(argv, vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(parse_command(b, next).unwrap(), None);
        assert!(parse_command(b"+OK\r\n", 0).is_err());
        assert!(parse_command(b"*1\r\n$2\r\nabc\r\n", 0).is_err());
    }
}
