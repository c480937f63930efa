//! Persistence driven from serverCron (Redis's `rdb.c` save side and the
//! `save` rules of `server.c`): SAVE, the forkless background save, the
//! save rules, loading at start, and the INFO persistence figures.
//!
//! # Background save without fork()
//!
//! Redis forks and lets the child write the snapshot; under writes every
//! touched page is copied (copy-on-write), so extra memory grows with the
//! write rate up to the whole dataset. gyre's kv process instead sweeps
//! its own keyspace in slices and keeps the snapshot point-in-time by
//! saving a key's old value just before a write changes it (per key, not
//! per page: [`crate::db`]'s `snapshot` module). The serialized records go
//! to a writer thread (`BgWriter`) through a bounded channel, which owns
//! the file: writes, CRC64, fsync, rename and the directory fsync never
//! block the loop. Extra memory is the channel (at most
//! `WRITER_QUEUE` × `CHUNK` bytes), the records not yet handed over, and one
//! bit per key (which keys a write saved ahead of the sweep). (README:
//! measurements.)
//!
//! # What one loop turn pays
//!
//! A slice ([`Server::bgsave_slice`]) runs once per turn of the loop,
//! after the clients' events, for at most `bgsave-slice-us` (250 µs by
//! default; the clock is read every [`SWEEP_STEP`] keys), and never waits
//! for the writer: a full queue leaves the chunk for the next slice, and
//! written chunks come back to be filled again (no 256 KiB allocation or
//! page faults per chunk). A write to a key ahead of the sweep only copies
//! the old key and value bytes (strings; an aggregate is serialized); the
//! next slices serialize and compress the copies inside their budget,
//! [`SWEEP_STEP`] between two looks at the clock (they once drained them
//! all, however many a turn's writes made: the turn grew past the budget
//! early in a save under a SET load), all of them only when
//! `COPIES_MAX` bytes wait (bounded memory). So a client waits at
//! most one slice behind the save per turn, and under a full load the save
//! takes about `bgsave-slice-us` of every turn; an idle loop runs slices
//! back to back. Measured with `examples/bgsave_ticks.rs` (the turn and the
//! slice, before and during a save under a SET load) and
//! `bench/run.sh kv-persist`.

use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::rdb::file::DumpFile;
use crate::rdb::load::Loader;
use crate::rdb::save::{put_header, put_kv, put_len, Aux};
use crate::rdb::{Error as RdbError, OP_RESIZEDB, OP_SELECTDB};
use crate::server::Server;

/// Redis's `CONFIG_BGSAVE_RETRY_DELAY`: seconds before a failed background
/// save is retried by the save rules.
pub const BGSAVE_RETRY_DELAY_SECS: i64 = 5;
/// Records are handed to the writer in chunks of about this size.
const CHUNK: usize = 256 * 1024;
/// Chunks the writer may have queued.
const WRITER_QUEUE: usize = 8;
/// `bgsave-slice-us`'s default.
pub const DEFAULT_BGSAVE_SLICE_US: u64 = 250;
/// Keys a slice serializes between two looks at the clock (and old values
/// copied ahead of the sweep it serializes).
pub const SWEEP_STEP: usize = 32;
/// Bytes of old values copied ahead of the sweep past which a slice
/// serializes them all, over its time budget: the save's extra memory
/// stays bounded whatever the write rate.
const COPIES_MAX: usize = 4 << 20;
/// Keys loaded per loading slice.
pub const LOAD_SLICE_KEYS: u64 = 2000;

/// The persistence settings (redis.conf names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistConfig {
    /// `dir`: where the dump file lives.
    pub dir: PathBuf,
    /// `dbfilename`.
    pub dbfilename: String,
    /// `save <seconds> <changes>` rules; empty: `save ""`.
    pub save: Vec<(u64, u64)>,
    /// `rdbcompression`.
    pub rdbcompression: bool,
    /// `rdbchecksum`.
    pub rdbchecksum: bool,
    /// `stop-writes-on-bgsave-error`.
    pub stop_writes_on_bgsave_error: bool,
    /// `rdb-del-sync-files` (accepted: there is no replication to sync).
    pub rdb_del_sync_files: bool,
    /// `rdb-save-incremental-fsync`: fdatasync a dump every
    /// [`crate::rdb::file::AUTOSYNC_BYTES`] written (Redis's default).
    pub rdb_save_incremental_fsync: bool,
    /// `bgsave-slice-us` (gyre's own): the longest a background save's
    /// slice runs on the loop per turn, in microseconds.
    pub bgsave_slice_us: u64,
    /// The append-only file's settings.
    pub aof: crate::aof::AofConfig,
}

/// Redis 7's default save rules.
pub const DEFAULT_SAVE: &[(u64, u64)] = &[(3600, 1), (300, 100), (60, 10000)];

impl Default for PersistConfig {
    /// The sans-I/O default has no save rules (a `Server` in a unit test
    /// never writes files); the `kv {}` block defaults to Redis's.
    fn default() -> Self {
        PersistConfig {
            dir: PathBuf::from("."),
            dbfilename: "dump.rdb".into(),
            save: Vec::new(),
            rdbcompression: true,
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            rdb_del_sync_files: false,
            rdb_save_incremental_fsync: true,
            bgsave_slice_us: DEFAULT_BGSAVE_SLICE_US,
            aof: crate::aof::AofConfig::default(),
        }
    }
}

impl PersistConfig {
    /// Whether a dump is fdatasynced as it is written: Redis's
    /// `rdb-save-incremental-fsync`, or `aof-rewrite-incremental-fsync`
    /// for an AOF's base.
    fn incremental_fsync(&self, aof_base: bool) -> bool {
        if aof_base {
            self.aof.rewrite_incremental_fsync
        } else {
            self.rdb_save_incremental_fsync
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.dbfilename)
    }

    /// `CONFIG GET save`'s text: `3600 1 300 100 60 10000`.
    pub fn save_text(&self) -> String {
        self.save
            .iter()
            .map(|(s, c)| format!("{s} {c}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Parse `save`'s argument text (pairs of numbers, or empty).
    pub fn parse_save(text: &str) -> Option<Vec<(u64, u64)>> {
        let w: Vec<&str> = text.split_whitespace().collect();
        if w.len() % 2 != 0 {
            return None;
        }
        w.chunks(2)
            .map(|p| Some((p[0].parse().ok()?, p[1].parse().ok()?)))
            .collect()
    }
}

/// CONFIG SET's check of `save`, `dir`, `dbfilename` (Redis's texts);
/// the value to store.
pub fn check_config(c: &PersistConfig, name: &str, v: &str) -> Result<String, String> {
    match name {
        "save" => PersistConfig::parse_save(v)
            .map(|_| v.to_string())
            .ok_or_else(|| "Invalid save parameters".to_string()),
        "dbfilename" if v.is_empty() || v.contains('/') => {
            Err("dbfilename can't be a path, just a filename".into())
        }
        "dir" => {
            let p = c.dir.join(v);
            if p.is_dir() {
                Ok(std::fs::canonicalize(&p).unwrap_or(p).display().to_string())
            } else {
                Err("No such file or directory".into())
            }
        }
        _ => Ok(v.to_string()),
    }
}

/// Store a value [`check_config`] accepted.
pub fn apply_config(c: &mut PersistConfig, name: &str, v: String) {
    match name {
        "save" => c.save = PersistConfig::parse_save(&v).unwrap_or_default(),
        "dir" => c.dir = PathBuf::from(v),
        "dbfilename" => c.dbfilename = v,
        _ => {}
    }
}

/// A message to the writer thread.
enum Msg {
    Data(Vec<u8>),
    Commit,
}

/// What a background sweep writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveKind {
    /// BGSAVE: the dump file.
    Rdb,
    /// BGREWRITEAOF: a new AOF base, an RDB with `aof-base` set or
    /// commands ([`crate::aof::rewrite`]).
    AofBase { rdb: bool },
}

/// The thread that owns a background save's file.
struct BgWriter {
    tx: SyncSender<Msg>,
    /// Written chunks coming back, emptied, to be filled again: the loop
    /// allocates (and faults in) no new 256 KiB buffer per chunk, and the
    /// writer frees none (an munmap would interrupt the loop's CPU too).
    spare: Receiver<Vec<u8>>,
    handle: JoinHandle<io::Result<u64>>,
}

impl BgWriter {
    /// The thread opens the temp file itself, so a directory that cannot
    /// be written fails the save in the background as Redis's child does
    /// (BGSAVE still answers "started"; INFO and MISCONF tell the rest).
    fn spawn(
        path: PathBuf,
        tag: String,
        checksum: bool,
        raw: bool,
        autosync: bool,
    ) -> io::Result<BgWriter> {
        let (tx, rx) = sync_channel::<Msg>(WRITER_QUEUE);
        let (spare_tx, spare) = sync_channel::<Vec<u8>>(WRITER_QUEUE + 2);
        let handle = std::thread::Builder::new()
            .name("gyre-bgsave".into())
            .spawn(move || {
                let file = DumpFile::create(&path, &tag, checksum)
                    .map(|f| if raw { f.raw() } else { f })
                    .map(|f| f.incremental_fsync(autosync))
                    .inspect_err(|e| {
                    log::warn!(
                        "Failed opening the temp RDB file temp-{tag}.rdb (in server root dir {}) for saving: {e}",
                        path.parent().map_or_else(String::new, |p| p.display().to_string())
                    );
                })?;
                write_loop(file, rx, spare_tx)
            })?;
        Ok(BgWriter { tx, spare, handle })
    }

    /// An empty chunk buffer: one the writer gave back, or a new one.
    fn buffer(&self) -> Vec<u8> {
        self.spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK + 64 * 1024))
    }
}

fn write_loop(
    mut file: DumpFile,
    rx: Receiver<Msg>,
    spare: SyncSender<Vec<u8>>,
) -> io::Result<u64> {
    loop {
        match rx.recv() {
            Ok(Msg::Data(mut b)) => {
                if let Err(e) = file.write(&b) {
                    file.abort();
                    return Err(e);
                }
                b.clear();
                let _ = spare.try_send(b);
            }
            Ok(Msg::Commit) => return file.commit(),
            Err(_) => {
                file.abort();
                return Err(io::Error::other("background save aborted"));
            }
        }
    }
}

/// A background save in progress.
pub struct Bgsave {
    pub kind: SaveKind,
    writer: Option<BgWriter>,
    /// Database being swept.
    db: usize,
    /// Database of the last record handed over (a SELECTDB goes before a
    /// record of another one).
    out_db: Option<usize>,
    /// Databases already announced with RESIZEDB.
    resized: Vec<bool>,
    sizes: Vec<(usize, usize)>,
    /// A chunk the queue had no room for.
    held: Option<Vec<u8>>,
    chunk: Vec<u8>,
    /// The sweep is over: what is left is the writer's.
    committed: bool,
    /// The writer was told to commit.
    commit_sent: bool,
    started: Instant,
    pub started_ms: i64,
}

impl std::fmt::Debug for Bgsave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bgsave").field("db", &self.db).finish()
    }
}

/// A load in progress.
pub struct Loading {
    pub loader: Loader<io::BufReader<std::fs::File>>,
    pub total_bytes: u64,
    pub started: Instant,
    pub started_ms: i64,
    /// Part of an AOF (its base or preamble): the AOF's loading logs the
    /// end of it.
    pub of_aof: bool,
}

impl std::fmt::Debug for Loading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loading").finish()
    }
}

/// Persistence state of a server.
#[derive(Debug)]
pub struct PersistState {
    pub bgsave: Option<Bgsave>,
    /// `rdb_last_bgsave_status` is ok.
    pub last_bgsave_ok: bool,
    /// When a background save was last tried (ms).
    pub last_bgsave_try_ms: i64,
    /// `rdb_last_bgsave_time_sec` (-1 before the first).
    pub last_bgsave_time_sec: i64,
    pub dirty_before_bgsave: u64,
    /// `rdb_saves`.
    pub saves: u64,
    /// Keys saved ahead of the sweep by writes in the last background save
    /// (`rdb_last_cow_size` counts bytes in Redis; here: records).
    pub last_copied: u64,
    pub loading: Option<Loading>,
    /// `BGSAVE SCHEDULE` / a save rule fired while a save was running.
    pub scheduled: bool,
    /// SHUTDOWN asked the process to exit.
    pub shutdown_asked: bool,
    /// The dump could not be loaded: exiting must not save over it.
    pub load_failed: bool,
    /// `rdb_last_load_keys_loaded` / `_expired`.
    pub last_load_keys: u64,
    /// Where the last RDB loaded ended in its file (an AOF's RDB preamble
    /// is followed by commands).
    pub last_load_offset: u64,
    pub last_load_expired: u64,
}

impl Default for PersistState {
    fn default() -> Self {
        PersistState {
            bgsave: None,
            last_bgsave_ok: true,
            last_bgsave_try_ms: 0,
            last_bgsave_time_sec: -1,
            dirty_before_bgsave: 0,
            saves: 0,
            last_copied: 0,
            loading: None,
            scheduled: false,
            shutdown_asked: false,
            load_failed: false,
            last_load_keys: 0,
            last_load_offset: 0,
            last_load_expired: 0,
        }
    }
}

/// `-MISCONF`: writes refused while the last background save failed.
pub const ERR_MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";

fn select(out: &mut Vec<u8>, db: usize, resize: Option<(usize, usize)>) {
    out.push(OP_SELECTDB);
    put_len(out, db as u64);
    if let Some((k, e)) = resize {
        out.push(OP_RESIZEDB);
        put_len(out, k as u64);
        put_len(out, e as u64);
    }
}

impl Server {
    fn aux(&self, now_ms: i64) -> Aux {
        Aux {
            ctime_secs: now_ms / 1000,
            used_mem: self.used_memory(),
            aof_base: false,
        }
    }

    /// Whether writes are refused (`writeCommandsDeniedByDiskError`).
    pub fn writes_denied(&self) -> bool {
        (self.config.persist.stop_writes_on_bgsave_error
            && !self.config.persist.save.is_empty()
            && !self.persist.last_bgsave_ok)
            || (!self.aof.last_write_ok && self.aof.status != crate::aof::AofStatus::Off)
    }

    pub fn is_loading(&self) -> bool {
        self.persist.loading.is_some() || self.aof.loading.is_some()
    }

    /// A background sweep (BGSAVE or an AOF rewrite) runs: Redis's
    /// `hasActiveChildProcess`.
    pub fn bgsave_in_progress(&self) -> bool {
        self.persist.bgsave.is_some()
    }

    /// A BGSAVE runs (`rdb_bgsave_in_progress`).
    pub fn rdb_bgsave_in_progress(&self) -> bool {
        self.persist
            .bgsave
            .as_ref()
            .is_some_and(|b| b.kind == SaveKind::Rdb)
    }

    /// SAVE (`rdbSave`): the whole dataset, synchronously.
    pub fn rdb_save(&mut self, now_ms: i64) -> io::Result<u64> {
        let path = self.config.persist.path();
        let n = self.rdb_save_to(&path, false, now_ms)?;
        self.dirty = 0;
        self.last_save_ms = now_ms;
        self.persist.last_bgsave_ok = true;
        self.persist.saves += 1;
        log::info!("DB saved on disk");
        Ok(n)
    }

    /// The whole dataset as an RDB file at `path` (crash-safe);
    /// `aof_base`: the `aof-base` AUX field of an AOF base file.
    pub fn rdb_save_to(
        &mut self,
        path: &std::path::Path,
        aof_base: bool,
        now_ms: i64,
    ) -> io::Result<u64> {
        let compress = self.config.persist.rdbcompression;
        let mut f = DumpFile::create(
            path,
            &std::process::id().to_string(),
            self.config.persist.rdbchecksum,
        )?
        .incremental_fsync(self.config.persist.incremental_fsync(aof_base));
        let mut aux = self.aux(now_ms);
        aux.aof_base = aof_base;
        let r = (|| {
            let mut out = Vec::with_capacity(CHUNK + 1024);
            put_header(&mut out, &aux);
            for (i, db) in self.dbs.iter().enumerate() {
                if db.is_empty() {
                    continue;
                }
                select(&mut out, i, Some((db.len(), db.expires_len())));
                for (k, v, e) in db.entries() {
                    put_kv(&mut out, k, v, e, compress);
                    if out.len() >= CHUNK {
                        f.write(&out)?;
                        out.clear();
                    }
                }
            }
            f.write(&out)
        })();
        match r {
            Ok(()) => f.commit(),
            Err(e) => {
                f.abort();
                Err(e)
            }
        }
    }

    /// Start a background save (`rdbSaveBackground`).
    pub fn bgsave_start(&mut self, now_ms: i64) -> io::Result<()> {
        self.persist.last_bgsave_try_ms = now_ms;
        let r = self.bgsave_open(now_ms);
        if let Err(e) = &r {
            log::warn!("Can't save in background: {e}");
            self.persist.last_bgsave_ok = false;
        }
        r
    }

    fn bgsave_open(&mut self, now_ms: i64) -> io::Result<()> {
        let path = self.config.persist.path();
        self.sweep_start(path, SaveKind::Rdb, now_ms)?;
        log::info!("Background saving started");
        Ok(())
    }

    /// Start a background sweep writing `path`.
    pub(crate) fn sweep_start(
        &mut self,
        path: PathBuf,
        kind: SaveKind,
        now_ms: i64,
    ) -> io::Result<()> {
        let (tag, raw) = match kind {
            SaveKind::Rdb => (format!("bg-{}", std::process::id()), false),
            SaveKind::AofBase { rdb } => (format!("rewriteaof-bg-{}", std::process::id()), !rdb),
        };
        let autosync = self.config.persist.incremental_fsync(kind != SaveKind::Rdb);
        let writer = BgWriter::spawn(path, tag, self.config.persist.rdbchecksum, raw, autosync)?;
        let compress = self.config.persist.rdbcompression;
        let mut chunk = Vec::with_capacity(CHUNK + 1024);
        if !raw {
            let mut aux = self.aux(now_ms);
            aux.aof_base = kind != SaveKind::Rdb;
            put_header(&mut chunk, &aux);
        }
        let sizes: Vec<(usize, usize)> = self
            .dbs
            .iter()
            .map(|d| (d.len(), d.expires_len()))
            .collect();
        for db in &mut self.dbs {
            if !db.is_empty() {
                db.snapshot_begin_as(compress, raw);
            }
        }
        if kind == SaveKind::Rdb {
            self.persist.dirty_before_bgsave = self.dirty;
        }
        self.persist.bgsave = Some(Bgsave {
            kind,
            writer: Some(writer),
            db: 0,
            out_db: None,
            resized: vec![false; self.dbs.len()],
            sizes,
            held: None,
            chunk,
            committed: false,
            commit_sent: false,
            started: Instant::now(),
            started_ms: now_ms,
        });
        Ok(())
    }

    /// One slice of the background save: at most `bgsave-slice-us` of
    /// sweeping (checked every [`SWEEP_STEP`] keys), handing full chunks
    /// to the writer without ever waiting for it; false once it finished
    /// (the driver stops scheduling slices).
    pub fn bgsave_slice(&mut self, now_ms: i64) -> bool {
        let Some(mut bg) = self.persist.bgsave.take() else {
            return false;
        };
        let t0 = Instant::now();
        let budget = Duration::from_micros(self.config.persist.bgsave_slice_us.max(1));
        // Finished writing?
        if bg.writer.as_ref().is_some_and(|w| w.handle.is_finished()) {
            let r = match bg.writer.take().map(|w| w.handle.join()) {
                Some(Ok(r)) => r,
                _ => Err(io::Error::other("writer thread failed")),
            };
            self.bgsave_done(&bg, r, now_ms);
            return false;
        }
        if !bg.committed && self.flush_held(&mut bg) {
            loop {
                if bg.db < self.dbs.len() && self.dbs[bg.db].snapshot_step(SWEEP_STEP) {
                    bg.db += 1;
                }
                let copies = self.gather(&mut bg, SWEEP_STEP);
                let swept = bg.db >= self.dbs.len() && copies == 0;
                if bg.chunk.len() >= CHUNK || swept {
                    let next = bg.writer.as_ref().map_or_else(Vec::new, BgWriter::buffer);
                    bg.held = Some(std::mem::replace(&mut bg.chunk, next));
                    if !self.flush_held(&mut bg) {
                        break;
                    }
                }
                if swept {
                    self.sweep_end();
                    bg.committed = true;
                    break;
                }
                if copies <= COPIES_MAX && t0.elapsed() >= budget {
                    break;
                }
            }
        }
        if bg.committed && !bg.commit_sent {
            // The queue is bounded and the loop never waits for the
            // writer: a full queue is tried again next slice.
            bg.commit_sent = match &bg.writer {
                Some(w) => !matches!(w.tx.try_send(Msg::Commit), Err(TrySendError::Full(_))),
                None => true,
            };
        }
        self.persist.bgsave = Some(bg);
        true
    }

    /// The sweep passed every database: end it (the writer gets the
    /// commit next).
    fn sweep_end(&mut self) {
        let (mut saved, mut copied) = (0, 0);
        for db in &mut self.dbs {
            let (s, c) = db.snapshot_end();
            saved += s;
            copied += c;
        }
        self.persist.last_copied = copied;
        log::debug!("background save swept {saved} keys, {copied} saved before a write");
    }

    /// Move every database's pending records into the chunk, at most
    /// `max_copies` old values copied ahead of the sweep from each;
    /// returns the copies' bytes left.
    fn gather(&mut self, bg: &mut Bgsave, max_copies: usize) -> usize {
        let mut left = 0;
        // While a large value's record is half-written in one database,
        // the others wait (a SELECTDB would land inside the record).
        let only = self.dbs.iter().position(|d| d.snapshot_in_record());
        for (i, db) in self.dbs.iter_mut().enumerate() {
            if only.is_some_and(|o| o != i) || db.snapshot_pending() == 0 {
                continue;
            }
            if bg.out_db != Some(i) {
                if bg.kind == (SaveKind::AofBase { rdb: false }) {
                    let n = i.to_string();
                    crate::aof::propagate::cat_command(&mut bg.chunk, &[b"SELECT", n.as_bytes()]);
                } else {
                    let resize = (!bg.resized[i]).then(|| bg.sizes[i]);
                    bg.resized[i] = true;
                    select(&mut bg.chunk, i, resize);
                }
                bg.out_db = Some(i);
            }
            left += db.snapshot_drain_some(&mut bg.chunk, max_copies);
        }
        left
    }

    /// Hand the held chunk to the writer; false if its queue is full.
    fn flush_held(&mut self, bg: &mut Bgsave) -> bool {
        let Some(c) = bg.held.take() else {
            return true;
        };
        let Some(w) = &bg.writer else {
            return true;
        };
        match w.tx.try_send(Msg::Data(c)) {
            Ok(()) => true,
            Err(TrySendError::Full(Msg::Data(c))) => {
                bg.held = Some(c);
                false
            }
            Err(_) => true,
        }
    }

    fn bgsave_done(&mut self, bg: &Bgsave, r: io::Result<u64>, now_ms: i64) {
        for db in &mut self.dbs {
            db.snapshot_end();
        }
        if bg.kind != SaveKind::Rdb {
            self.rewrite_done(r, now_ms);
            return;
        }
        self.persist.last_bgsave_time_sec = bg.started.elapsed().as_secs() as i64;
        match r {
            Ok(_) => {
                log::info!("Background saving terminated with success");
                self.dirty = self.dirty.saturating_sub(self.persist.dirty_before_bgsave);
                self.last_save_ms = now_ms;
                self.persist.last_bgsave_ok = true;
                self.persist.saves += 1;
            }
            Err(e) => {
                log::warn!("Background saving error: {e}");
                self.persist.last_bgsave_ok = false;
            }
        }
    }

    /// The persistence part of serverCron: save rules and a scheduled
    /// BGSAVE. True when a background save was started (the driver starts
    /// its slices).
    pub fn persistence_cron(&mut self, now_ms: i64) -> bool {
        if self.is_loading() {
            return false;
        }
        if self.aof_cron(now_ms) {
            return true;
        }
        if self.bgsave_in_progress() {
            return false;
        }
        let now = now_ms / 1000;
        let retry_ok = now - self.persist.last_bgsave_try_ms / 1000 > BGSAVE_RETRY_DELAY_SECS
            || self.persist.last_bgsave_ok;
        if self.persist.scheduled && retry_ok {
            self.persist.scheduled = false;
            return self.bgsave_start(now_ms).is_ok();
        }
        let since = now - self.last_save_ms / 1000;
        let hit = self
            .config
            .persist
            .save
            .iter()
            .find(|&&(secs, changes)| self.dirty >= changes && since > secs as i64);
        if let (Some(&(secs, changes)), true) = (hit, retry_ok) {
            log::info!("{changes} changes in {secs} seconds. Saving...");
            return self.bgsave_start(now_ms).is_ok();
        }
        false
    }

    /// Open the dump file for loading; `Ok(false)` when there is none.
    pub fn load_begin(&mut self, now_ms: i64) -> Result<bool, RdbError> {
        let path = self.config.persist.path();
        let f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => {
                self.persist.load_failed = true;
                return Err(RdbError::Io(e));
            }
        };
        let total_bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
        let loader = Loader::start(io::BufReader::with_capacity(256 * 1024, f))
            .inspect_err(|_| self.persist.load_failed = true)?
            .with_size(total_bytes);
        self.persist.loading = Some(Loading {
            loader,
            total_bytes,
            started: Instant::now(),
            started_ms: now_ms,
            of_aof: false,
        });
        Ok(true)
    }

    /// One loading slice; `Ok(true)` when loading finished.
    pub fn load_slice(&mut self, now_ms: i64) -> Result<bool, RdbError> {
        let Some(l) = self.persist.loading.as_mut() else {
            return Ok(true);
        };
        let lim = self.config.encodings;
        let check = self.config.persist.rdbchecksum;
        let done = l
            .loader
            .step(&mut self.dbs, &lim, now_ms, check, LOAD_SLICE_KEYS);
        match done {
            Ok(false) => Ok(false),
            Ok(true) => {
                if let Some(l) = self.persist.loading.take() {
                    self.persist.last_load_offset = l.loader.offset();
                    let st = &l.loader.stats;
                    self.persist.last_load_keys = st.keys;
                    self.persist.last_load_expired = st.expired;
                    for (k, v) in &st.aux {
                        if k == b"redis-ver" {
                            log::info!(
                                "Loading RDB produced by version {}",
                                String::from_utf8_lossy(v)
                            );
                        }
                    }
                    log::info!(
                        "Done loading RDB, keys loaded: {}, keys expired: {}.",
                        st.keys,
                        st.expired
                    );
                    if !l.of_aof {
                        log::info!(
                            "DB loaded from disk: {:.3} seconds",
                            l.started.elapsed().as_secs_f64()
                        );
                    }
                }
                self.dirty = 0;
                self.last_save_ms = now_ms;
                Ok(true)
            }
            Err(e) => {
                self.persist.loading = None;
                self.persist.load_failed = true;
                Err(e)
            }
        }
    }

    /// Cancel a running background save (Redis kills its child): the
    /// sweeps end, the writer thread drops its temp file. Not a failure:
    /// `rdb_last_bgsave_status` is unchanged.
    pub fn abort_bgsave(&mut self, why: &str) {
        if let Some(mut bg) = self.persist.bgsave.take() {
            for db in &mut self.dbs {
                db.snapshot_end();
            }
            // Closing the queue makes the writer drop its temp file; one
            // already told to commit finishes its rename first. Waiting for
            // it keeps a late rename from landing after what follows (the
            // save of FLUSHALL or of the shutdown).
            if let Some(w) = bg.writer.take() {
                drop(w.tx);
                let _ = w.handle.join();
            }
            if bg.kind != SaveKind::Rdb {
                log::info!("Background AOF rewrite cancelled by {why}");
                self.rewrite_cleanup();
                return;
            }
            log::info!("Background saving cancelled by {why}");
        }
    }

    /// FLUSHALL with save rules writes the (now empty) dataset at once.
    pub fn save_after_flushall(&mut self, now_ms: i64) {
        if !self.config.persist.save.is_empty() {
            if let Err(e) = self.rdb_save(now_ms) {
                log::warn!("Failed saving the DB after FLUSHALL: {e}");
            }
        }
    }

    /// SIGTERM / QUIT with save rules, or SHUTDOWN: a last synchronous save
    /// (an unfinished background save is abandoned first, as Redis kills
    /// its child). True if saved.
    pub fn save_on_exit(&mut self, now_ms: i64) -> bool {
        if self.bgsave_in_progress() {
            log::info!("There is a child saving an .rdb. Killing it!");
            self.abort_bgsave("shutdown");
        }
        log::info!("Saving the final RDB snapshot before exiting.");
        match self.rdb_save(now_ms) {
            Ok(_) => true,
            Err(e) => {
                log::warn!("Error trying to save the DB, can't exit. ({e})");
                false
            }
        }
    }

    /// A load in progress: its start (ms), total bytes and bytes loaded,
    /// over every file of an AOF.
    fn loading_progress(&self) -> Option<(i64, u64, u64)> {
        let rdb = self.persist.loading.as_ref();
        if let Some(a) = &self.aof.loading {
            let loaded = a.loaded_bytes(rdb.map(|l| l.loader.offset()));
            return Some((a.started_ms, a.total_bytes, loaded));
        }
        rdb.map(|l| (l.started_ms, l.total_bytes, l.loader.offset()))
    }

    /// INFO persistence's fields.
    pub fn persistence_info(&self, now_ms: i64) -> Vec<(&'static str, String)> {
        let p = &self.persist;
        let mut v = vec![
            ("loading", u8::from(self.is_loading()).to_string()),
            ("async_loading", "0".into()),
            ("current_cow_peak", "0".into()),
            ("current_cow_size", "0".into()),
            ("current_cow_size_age", "0".into()),
            ("current_fork_perc", "0.00".into()),
            (
                "current_save_keys_processed",
                self.dbs
                    .iter()
                    .map(|d| d.snapshot_saved())
                    .sum::<u64>()
                    .to_string(),
            ),
            (
                "current_save_keys_total",
                p.bgsave
                    .as_ref()
                    .map_or(0, |b| b.sizes.iter().map(|s| s.0).sum::<usize>())
                    .to_string(),
            ),
        ];
        if let Some((start_ms, total, loaded)) = self.loading_progress() {
            let perc = if total > 0 {
                loaded as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            // Redis's: elapsed seconds times the bytes left over the bytes
            // loaded, 1 until something was loaded.
            let elapsed = (now_ms - start_ms) / 1000;
            let eta = if elapsed <= 0 || loaded == 0 {
                1
            } else {
                (elapsed as f64 * total.saturating_sub(loaded) as f64 / loaded as f64) as u64
            };
            v.extend([
                ("loading_start_time", (start_ms / 1000).to_string()),
                ("loading_total_bytes", total.to_string()),
                ("loading_rdb_used_mem", "0".into()),
                ("loading_loaded_bytes", loaded.to_string()),
                ("loading_loaded_perc", format!("{perc:.2}")),
                ("loading_eta_seconds", eta.to_string()),
            ]);
        }
        v.extend([
            ("rdb_changes_since_last_save", self.dirty.to_string()),
            (
                "rdb_bgsave_in_progress",
                u8::from(self.rdb_bgsave_in_progress()).to_string(),
            ),
            ("rdb_last_save_time", (self.last_save_ms / 1000).to_string()),
            (
                "rdb_last_bgsave_status",
                if p.last_bgsave_ok { "ok" } else { "err" }.into(),
            ),
            (
                "rdb_last_bgsave_time_sec",
                p.last_bgsave_time_sec.to_string(),
            ),
            (
                "rdb_current_bgsave_time_sec",
                p.bgsave
                    .as_ref()
                    .filter(|b| b.kind == SaveKind::Rdb)
                    .map_or(-1, |b| (now_ms - b.started_ms) / 1000)
                    .to_string(),
            ),
            ("rdb_saves", p.saves.to_string()),
            ("rdb_last_cow_size", "0".into()),
            (
                "rdb_last_load_keys_expired",
                p.last_load_expired.to_string(),
            ),
            ("rdb_last_load_keys_loaded", p.last_load_keys.to_string()),
        ]);
        v.extend(self.aof_info(now_ms));

        v
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::server::Config;

    fn server_in(dir: &std::path::Path) -> Server {
        let mut config = Config::default();
        config.persist.dir = dir.to_path_buf();
        Server::new(config, 1_000)
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gyre-persist-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn run(s: &mut Server, args: &[&str], now: i64) -> String {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let mut out = Vec::new();
        s.execute(0, &argv, now, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn loading_answers_loading_and_then_serves() {
        let dir = tmpdir("loading");
        let mut s = server_in(&dir);
        for i in 0..(3 * LOAD_SLICE_KEYS) {
            s.dbs[0].set(format!("k{i}").as_bytes(), b"v".to_vec(), false);
        }
        assert_eq!(run(&mut s, &["SAVE"], 2_000), "+OK\r\n");
        let mut t = server_in(&dir);
        assert!(t.load_begin(3_000).unwrap());
        assert_eq!(
            run(&mut t, &["GET", "k1"], 3_000),
            "-LOADING Redis is loading the dataset in memory\r\n"
        );
        assert!(run(&mut t, &["INFO", "persistence"], 3_000).contains("loading:1\r\n"));
        assert!(!t.load_slice(3_000).unwrap());
        while !t.load_slice(3_000).unwrap() {}
        assert_eq!(run(&mut t, &["GET", "k1"], 3_000), "$1\r\nv\r\n");
        assert!(run(&mut t, &["INFO", "persistence"], 3_000).contains("loading:0\r\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn config_get_and_set_of_the_persistence_parameters() {
        let dir = tmpdir("config");
        let mut s = server_in(&dir);
        assert_eq!(
            run(&mut s, &["CONFIG", "SET", "save", "900 1 300 10"], 0),
            "+OK\r\n"
        );
        assert_eq!(
            run(&mut s, &["CONFIG", "GET", "save"], 0),
            "*2\r\n$4\r\nsave\r\n$12\r\n900 1 300 10\r\n"
        );
        assert!(
            run(&mut s, &["CONFIG", "SET", "save", "900"], 0).contains("Invalid save parameters")
        );
        assert!(run(&mut s, &["CONFIG", "SET", "dbfilename", "a/b.rdb"], 0)
            .contains("dbfilename can't be a path, just a filename"));
        assert!(run(&mut s, &["CONFIG", "SET", "dir", "no-such-dir"], 0)
            .contains("No such file or directory"));
        assert_eq!(
            run(&mut s, &["CONFIG", "SET", "rdbcompression", "no"], 0),
            "+OK\r\n"
        );
        assert!(!s.config.persist.rdbcompression);
        // Redis's default: a dump is fdatasynced every 4 MB.
        assert_eq!(
            run(&mut s, &["CONFIG", "GET", "rdb-save-incremental-fsync"], 0),
            "*2\r\n$26\r\nrdb-save-incremental-fsync\r\n$3\r\nyes\r\n"
        );
        assert_eq!(
            run(
                &mut s,
                &["CONFIG", "SET", "rdb-save-incremental-fsync", "no"],
                0
            ),
            "+OK\r\n"
        );
        assert!(!s.config.persist.rdb_save_incremental_fsync);
        assert_eq!(run(&mut s, &["CONFIG", "SET", "save", ""], 0), "+OK\r\n");
        assert!(s.config.persist.save.is_empty());
        // gyre's own slice budget, checked as Redis checks an integer.
        assert_eq!(
            run(&mut s, &["CONFIG", "GET", "bgsave-slice-us"], 0),
            "*2\r\n$15\r\nbgsave-slice-us\r\n$3\r\n250\r\n"
        );
        assert_eq!(
            run(&mut s, &["CONFIG", "SET", "bgsave-slice-us", "80"], 0),
            "+OK\r\n"
        );
        assert_eq!(s.config.persist.bgsave_slice_us, 80);
        assert!(run(&mut s, &["CONFIG", "SET", "bgsave-slice-us", "5"], 0)
            .contains("argument must be between 10 and 1000000 inclusive"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn flushall_cancels_a_save_and_writes_an_empty_dump_with_save_rules() {
        let dir = tmpdir("flushall");
        let mut s = server_in(&dir);
        s.config.persist.save = vec![(3600, 1)];
        for i in 0..5000 {
            s.dbs[0].set(format!("k{i}").as_bytes(), b"v".to_vec(), false);
        }
        assert!(run(&mut s, &["BGSAVE"], 2_000).contains("Background saving started"));
        assert!(s.bgsave_slice(2_000));
        assert_eq!(run(&mut s, &["FLUSHALL"], 2_000), "+OK\r\n");
        assert!(!s.bgsave_in_progress());
        assert!(!s.dbs[0].snapshot_active());
        assert_eq!(s.dirty, 1);
        let mut back: Vec<crate::db::Db> = (0..16).map(crate::db::Db::new).collect();
        let f = std::fs::File::open(dir.join("dump.rdb")).unwrap();
        let st = crate::rdb::load::load(f, &mut back, &Default::default(), 0, true).unwrap();
        assert_eq!(st.keys, 0);
        assert!(s.persist.last_bgsave_ok);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bgsave_slices_write_a_point_in_time_file() {
        let dir = tmpdir("bg");
        let mut s = server_in(&dir);
        for i in 0..5000 {
            s.dbs[0].set(format!("k{i}").as_bytes(), b"old".to_vec(), false);
            s.dbs[3].set(format!("k{i}").as_bytes(), b"three".to_vec(), false);
        }
        s.bgsave_start(2_000).unwrap();
        let mut turns = 0;
        while s.bgsave_slice(2_000) {
            s.dbs[0].set(format!("k{turns}").as_bytes(), b"new".to_vec(), false);
            s.dbs[3].remove(format!("k{turns}").as_bytes());
            s.dbs[1].set(b"fresh", b"x".to_vec(), false);
            turns += 1;
            assert!(turns < 1_000_000);
            std::thread::sleep(Duration::from_micros(50));
        }
        assert!(s.persist.last_bgsave_ok);
        let mut back: Vec<crate::db::Db> = (0..16).map(crate::db::Db::new).collect();
        let f = std::fs::File::open(dir.join("dump.rdb")).unwrap();
        let st = crate::rdb::load::load(f, &mut back, &Default::default(), 0, true).unwrap();
        assert_eq!(st.keys, 10_000);
        assert!(back[0]
            .entries()
            .all(|(_, v, _)| matches!(v, crate::db::Ref::Str(b"old"))));
        assert_eq!(back[3].len(), 5000);
        assert!(back[1].is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
