//! The append-only file (Redis 7.0's `aof.c`): every write's effect
//! ([`propagate`]) appended to an incremental file, Redis 7's multi-part
//! layout ([`manifest`]: one base file, incremental files, the manifest
//! naming them, in `appenddirname`), `appendfsync always|everysec|no`
//! ([`bio`] fsyncs in the background for everysec), BGREWRITEAOF and the
//! automatic rewrite ([`rewrite`]: a new base written by the forkless
//! snapshot sweep while new writes go to a new incremental file), loading
//! at start ([`load`]), `CONFIG SET appendonly`, INFO persistence.
//!
//! # When the buffer reaches the disk
//!
//! Commands append to `buf`; [`Server::aof_flush`] writes it
//! (`flushAppendOnlyFile`). With `always` the server flushes and fsyncs at
//! the end of every read's batch of commands, before their replies go out
//! (an acknowledged write is on disk); in the kv process (group commit,
//! [`AofState::group_commit`]) the replies of a turn's reads are held
//! instead and the buffer is written and fsynced once, before the loop
//! sleeps, then the replies go out, as Redis's `beforeSleep` does: one
//! fsync per loop turn, not one per client read. With `everysec` and `no` the
//! buffer is written before the loop sleeps and from serverCron; everysec
//! queues one fsync per second on the [`bio`] thread and, while an fsync
//! is still running, postpones the write up to two seconds (Redis's rule,
//! with its log line) so the loop never blocks on the disk.

pub mod bio;
pub mod load;
pub mod manifest;
pub mod propagate;
pub mod rewrite;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;

use crate::server::Server;
use manifest::Manifest;

/// `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    Always,
    EverySec,
    No,
}

impl Fsync {
    pub fn parse(s: &[u8]) -> Option<Fsync> {
        match s.to_ascii_lowercase().as_slice() {
            b"always" => Some(Fsync::Always),
            b"everysec" => Some(Fsync::EverySec),
            b"no" => Some(Fsync::No),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }
}

/// The AOF settings (redis.conf names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AofConfig {
    pub appendonly: bool,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: Fsync,
    pub no_appendfsync_on_rewrite: bool,
    /// `auto-aof-rewrite-percentage` (0: off).
    pub auto_rewrite_perc: u64,
    pub auto_rewrite_min_size: u64,
    pub use_rdb_preamble: bool,
    pub load_truncated: bool,
    pub timestamp_enabled: bool,
    pub rewrite_incremental_fsync: bool,
}

impl Default for AofConfig {
    fn default() -> Self {
        AofConfig {
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appenddirname: "appendonlydir".into(),
            appendfsync: Fsync::EverySec,
            no_appendfsync_on_rewrite: false,
            auto_rewrite_perc: 100,
            auto_rewrite_min_size: 64 * 1024 * 1024,
            use_rdb_preamble: true,
            load_truncated: true,
            timestamp_enabled: false,
            rewrite_incremental_fsync: true,
        }
    }
}

/// Redis's `aof_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AofStatus {
    Off,
    On,
    /// `CONFIG SET appendonly yes`: on once the first rewrite finished.
    WaitRewrite,
}

/// Redis's `AOF_WRITE_LOG_ERROR_RATE`, seconds between two write-error
/// log lines.
const WRITE_LOG_ERROR_RATE: i64 = 30;
/// Postponed writes wait for a running fsync at most this long (ms).
const MAX_POSTPONE_MS: i64 = 2000;

/// The AOF state of a server.
#[derive(Debug)]
pub struct AofState {
    pub status: AofStatus,
    pub manifest: Manifest,
    /// The incremental file written now.
    pub(crate) file: Option<File>,
    /// Commands not yet written (`aof_buf`).
    pub(crate) buf: Vec<u8>,
    /// Database of the last command written (a SELECT goes first when it
    /// changes); `None` after a new file is opened.
    pub(crate) selected_db: Option<usize>,
    /// `aof_current_size`, `aof_rewrite_base_size`.
    pub current_size: u64,
    pub base_size: u64,
    /// Bytes of the current incr file, and when it was opened.
    pub(crate) incr_size: u64,
    pub(crate) fsync_offset: u64,
    pub(crate) last_fsync_ms: i64,
    pub(crate) flush_postponed_ms: i64,
    pub(crate) bio: Option<bio::Bio>,
    pub last_write_ok: bool,
    pub(crate) last_write_err: String,
    pub(crate) last_write_error_log: i64,
    pub delayed_fsync: u64,
    /// A rewrite waits for the running background save.
    pub rewrite_scheduled: bool,
    pub last_rewrite_ok: bool,
    pub last_rewrite_time_sec: i64,
    pub rewrites: u64,
    pub consecutive_failures: u64,
    /// The new base being written: its name and the manifest's state at
    /// the rewrite's start.
    pub(crate) rewrite: Option<rewrite::Pending>,
    /// Second of the last `#TS` annotation.
    pub(crate) last_ts: u64,
    /// The AOF being loaded at start.
    pub(crate) loading: Option<load::AofLoad>,
    /// `appendfsync always` commits once per loop turn: the driver holds
    /// the replies ([`Server::hold_output`]) until [`Server::before_sleep`]
    /// fsynced what they acknowledge. Off, each read's batch is fsynced
    /// before its replies are returned (the sans-I/O callers).
    pub group_commit: bool,
    /// Clients whose replies wait for the turn's fsync.
    pub(crate) held: Vec<crate::server::ClientId>,
}

impl Default for AofState {
    fn default() -> Self {
        AofState {
            status: AofStatus::Off,
            manifest: Manifest::default(),
            file: None,
            buf: Vec::new(),
            selected_db: None,
            current_size: 0,
            base_size: 0,
            incr_size: 0,
            fsync_offset: 0,
            last_fsync_ms: 0,
            flush_postponed_ms: 0,
            bio: None,
            last_write_ok: true,
            last_write_err: String::new(),
            last_write_error_log: 0,
            delayed_fsync: 0,
            rewrite_scheduled: false,
            last_rewrite_ok: true,
            last_rewrite_time_sec: -1,
            rewrites: 0,
            consecutive_failures: 0,
            rewrite: None,
            last_ts: 0,
            loading: None,
            group_commit: false,
            held: Vec::new(),
        }
    }
}

/// `-MISCONF` while the AOF cannot be written.
pub fn err_misconf_aof(why: &str) -> String {
    format!("MISCONF Errors writing to the AOF file: {why}")
}

impl Server {
    /// `appenddirname` under `dir`.
    pub fn aof_dir(&self) -> PathBuf {
        self.config
            .persist
            .dir
            .join(&self.config.persist.aof.appenddirname)
    }

    pub fn aof_on(&self) -> bool {
        self.aof.status != AofStatus::Off
    }

    /// Keep the propagation switch in step with the AOF state.
    pub fn sync_propagation(&mut self) {
        let on = self.aof.status != AofStatus::Off;
        self.prop.on = on;
        for db in &mut self.dbs {
            if on {
                db.deleted_log.get_or_insert_with(Vec::new);
            } else {
                db.deleted_log = None;
            }
        }
    }

    /// Redis's `feedAppendOnlyFile`: one command into the buffer, after a
    /// SELECT when its database is not the last one written.
    pub(crate) fn aof_feed(&mut self, db: usize, args: &[&[u8]]) {
        if self.aof_select(db) {
            propagate::cat_command(&mut self.aof.buf, args);
        }
    }

    /// [`Server::aof_feed`] of a command's own arguments.
    pub(crate) fn aof_feed_argv(&mut self, db: usize, argv: crate::resp::Argv<'_>) {
        if self.aof_select(db) {
            propagate::cat_iter(&mut self.aof.buf, argv.len(), argv.iter());
        }
    }

    /// The annotation and SELECT that go before a command for `db`;
    /// false while the AOF is off.
    fn aof_select(&mut self, db: usize) -> bool {
        if self.aof.status == AofStatus::Off {
            return false;
        }
        if self.config.persist.aof.timestamp_enabled {
            // `#TS:<unix seconds>` once per second (Redis's
            // `genAofTimestampAnnotationIfNeeded`), for point-in-time
            // recovery with `redis-check-aof --truncate-to-timestamp`.
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if secs > self.aof.last_ts {
                self.aof.last_ts = secs;
                self.aof
                    .buf
                    .extend_from_slice(format!("#TS:{secs}\r\n").as_bytes());
            }
        }
        if self.aof.selected_db != Some(db) {
            let n = db.to_string();
            propagate::cat_command(&mut self.aof.buf, &[b"SELECT", n.as_bytes()]);
            self.aof.selected_db = Some(db);
        }
        true
    }

    /// Whether fsync is off while a rewrite runs
    /// (`no-appendfsync-on-rewrite`).
    fn fsync_suspended(&self) -> bool {
        self.config.persist.aof.no_appendfsync_on_rewrite && self.persist.bgsave.is_some()
    }

    /// Redis's `flushAppendOnlyFile`: write the buffer, then fsync as the
    /// policy says. `force` writes even while an everysec fsync runs.
    pub fn aof_flush(&mut self, force: bool, now_ms: i64) {
        let policy = self.config.persist.aof.appendfsync;
        if self.aof.buf.is_empty() {
            // Data written but not yet fsynced in the last second (Redis:
            // fsync even with an empty buffer).
            if policy == Fsync::EverySec
                && self.aof.fsync_offset != self.aof.incr_size
                && now_ms - self.aof.last_fsync_ms >= 1000
                && !self.aof.bio.as_ref().is_some_and(bio::Bio::busy)
            {
                self.aof_fsync_everysec(now_ms);
            }
            return;
        }
        // The latency monitor's write event, chosen before writing as
        // Redis's flushAppendOnlyFile does.
        let write_event =
            if policy == Fsync::EverySec && self.aof.bio.as_ref().is_some_and(bio::Bio::busy) {
                "aof-write-pending-fsync"
            } else if self.bgsave_in_progress() {
                "aof-write-active-child"
            } else {
                "aof-write-alone"
            };
        let Some(file) = self.aof.file.as_mut() else {
            return;
        };
        if policy == Fsync::EverySec && !force && self.aof.bio.as_ref().is_some_and(bio::Bio::busy)
        {
            if self.aof.flush_postponed_ms == 0 {
                self.aof.flush_postponed_ms = now_ms;
                return;
            }
            if now_ms - self.aof.flush_postponed_ms < MAX_POSTPONE_MS {
                return;
            }
            self.aof.delayed_fsync += 1;
            log::info!("Asynchronous AOF fsync is taking too long (disk is busy?). Writing the AOF buffer without waiting for fsync to complete, this may slow down Redis.");
        }
        self.aof.flush_postponed_ms = 0;
        let started = crate::cmdstats::clock_ns();
        let written = file.write_all(&self.aof.buf);
        let ns = crate::cmdstats::clock_ns().saturating_sub(started);
        self.latmon.sample_if_needed(write_event, ns);
        self.latmon.sample_if_needed("aof-write", ns);
        let Some(file) = self.aof.file.as_mut() else {
            return;
        };
        match written {
            Ok(()) => {
                let n = self.aof.buf.len() as u64;
                self.aof.current_size += n;
                self.aof.incr_size += n;
                if !self.aof.last_write_ok {
                    log::warn!("AOF write error looks solved, Redis can write again.");
                }
                self.aof.last_write_ok = true;
                self.aof.buf.clear();
                if self.aof.buf.capacity() > 4 * 1024 * 1024 {
                    self.aof.buf = Vec::new();
                }
            }
            Err(e) => {
                // A partial write leaves a torn command: cut the file back
                // to the last complete one and keep the buffer to retry.
                let _ = file.set_len(self.aof.incr_size);
                let now = now_ms / 1000;
                if now - self.aof.last_write_error_log > WRITE_LOG_ERROR_RATE {
                    log::warn!("Error writing to the AOF file: {e}");
                    self.aof.last_write_error_log = now;
                }
                self.aof.last_write_ok = false;
                self.aof.last_write_err = e.to_string();
                if policy == Fsync::Always {
                    log::warn!("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                    std::process::exit(1);
                }
                return;
            }
        }
        if self.fsync_suspended() {
            return;
        }
        match policy {
            Fsync::Always => {
                if let Some(f) = &self.aof.file {
                    let started = crate::cmdstats::clock_ns();
                    let synced = f.sync_data();
                    let ns = crate::cmdstats::clock_ns().saturating_sub(started);
                    self.latmon.sample_if_needed("aof-fsync-always", ns);
                    if let Err(e) = synced {
                        log::warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}. Exiting...");
                        std::process::exit(1);
                    }
                }
                self.aof.fsync_offset = self.aof.incr_size;
                self.aof.last_fsync_ms = now_ms;
            }
            Fsync::EverySec => {
                if now_ms - self.aof.last_fsync_ms >= 1000 {
                    self.aof_fsync_everysec(now_ms);
                }
            }
            Fsync::No => {}
        }
    }

    fn aof_fsync_everysec(&mut self, now_ms: i64) {
        if self.aof.bio.is_none() {
            match bio::Bio::spawn() {
                Ok(b) => self.aof.bio = Some(b),
                Err(e) => {
                    log::warn!("Can't start the AOF fsync thread: {e}");
                    return;
                }
            }
        }
        if let (Some(b), Some(f)) = (&self.aof.bio, &self.aof.file) {
            if !b.busy() {
                b.fsync(f, self.aof.incr_size);
                self.aof.fsync_offset = self.aof.incr_size;
                self.aof.last_fsync_ms = now_ms;
            }
        }
    }

    /// At the end of a read's commands, before their replies go out:
    /// `appendfsync always` makes them durable first.
    #[inline]
    pub(crate) fn aof_after_batch(&mut self, now_ms: i64) {
        if !self.aof.buf.is_empty()
            && self.config.persist.aof.appendfsync == Fsync::Always
            && !self.aof.group_commit
        {
            self.aof_flush(true, now_ms);
        }
    }

    /// Replies must wait for this turn's fsync: `appendfsync always` with
    /// group commit and commands not yet on disk.
    pub fn aof_hold_replies(&self) -> bool {
        self.aof.group_commit
            && !self.aof.buf.is_empty()
            && self.aof.status != AofStatus::Off
            && self.config.persist.aof.appendfsync == Fsync::Always
    }

    /// Keep a read's replies in client `id`'s output, unsent (its pending
    /// output looks empty), until [`Server::release_held`].
    pub fn hold_output(&mut self, id: crate::server::ClientId, bytes: &[u8], now_ms: i64) {
        if !self.aof.held.contains(&id) {
            self.aof.held.push(id);
        }
        self.queue_output(id, bytes, now_ms);
    }

    /// The replies made for client `id` while it was blocked (a BLPOP
    /// served by another client's push, a timeout) join its output, held
    /// like any reply of the turn while `appendfsync always` has writes
    /// not yet on disk: the push that served the pop must be durable
    /// before the popped element is shown (Redis sends every reply after
    /// `beforeSleep`'s write and fsync).
    pub fn deliver_blocked_output(&mut self, id: crate::server::ClientId, now_ms: i64) {
        let pending = self.take_output(id);
        if pending.is_empty() {
            return;
        }
        if self.aof_hold_replies() {
            self.hold_output(id, &pending, now_ms);
        } else {
            self.queue_output(id, &pending, now_ms);
        }
    }

    /// Whether client `id`'s output waits for the turn's fsync.
    #[inline]
    pub fn output_held(&self, id: crate::server::ClientId) -> bool {
        !self.aof.held.is_empty() && self.aof.held.contains(&id)
    }

    /// After the turn's write and fsync: the held replies go out (their
    /// clients are listed for the driver to write to).
    pub(crate) fn release_held(&mut self) {
        if self.aof.held.is_empty() || self.aof_hold_replies() {
            return;
        }
        for id in std::mem::take(&mut self.aof.held) {
            if !self.pending_output(id).is_empty() {
                self.writers.push(id);
            }
        }
    }

    /// Before the loop sleeps (`beforeSleep`'s `flushAppendOnlyFile(0)`).
    pub fn aof_before_sleep(&mut self, now_ms: i64) {
        if self.aof.status != AofStatus::Off {
            self.aof_flush(false, now_ms);
        }
    }

    /// The AOF part of serverCron: a postponed or failed write, the
    /// scheduled and the automatic rewrite. True when a rewrite started
    /// (the driver runs its slices).
    pub fn aof_cron(&mut self, now_ms: i64) -> bool {
        if self.aof.status == AofStatus::Off {
            return false;
        }
        // A postponed or failed write, and everysec's once-a-second fsync
        // when the loop is idle.
        self.aof_flush(false, now_ms);
        if self.persist.bgsave.is_some() || self.is_loading() {
            return false;
        }
        if self.aof.rewrite_scheduled {
            return self.rewrite_background(now_ms).is_ok();
        }
        let c = &self.config.persist.aof;
        if self.aof.status == AofStatus::On
            && c.auto_rewrite_perc > 0
            && self.aof.current_size > c.auto_rewrite_min_size
        {
            let base = self.aof.base_size.max(1);
            let growth = (self.aof.current_size * 100 / base).saturating_sub(100);
            if growth >= c.auto_rewrite_perc {
                log::info!("Starting automatic rewriting of AOF on {growth}% growth");
                return self.rewrite_background(now_ms).is_ok();
            }
        }
        false
    }

    /// Open incremental file `name` for appending; `fresh`: a new file
    /// (emptied if a stale one has the name).
    pub(crate) fn aof_open_incr(&mut self, name: &str, fresh: bool) -> io::Result<File> {
        let path = self.aof_dir().join(name);
        if fresh {
            let _ = std::fs::remove_file(&path);
        }
        OpenOptions::new().create(true).append(true).open(path)
    }

    /// Start writing a new incremental file: the buffer goes to the old
    /// one first; a SELECT starts the new one.
    pub(crate) fn aof_switch_file(&mut self, file: File, size: u64, now_ms: i64) {
        self.aof_flush(true, now_ms);
        if let Some(old) = self.aof.file.take() {
            if self.config.persist.aof.appendfsync != Fsync::No {
                let _ = old.sync_data();
            }
        }
        self.aof.file = Some(file);
        self.aof.incr_size = size;
        self.aof.fsync_offset = size;
        self.aof.selected_db = None;
    }

    /// Stop the AOF (`stopAppendOnly`): flush and fsync, close, cancel a
    /// rewrite.
    pub fn aof_stop(&mut self, now_ms: i64) {
        if self.aof.status == AofStatus::Off {
            return;
        }
        self.aof_flush(true, now_ms);
        if let Some(f) = &self.aof.file {
            let _ = f.sync_data();
        }
        self.aof.fsync_offset = self.aof.incr_size;
        if self.aof.rewrite.is_some() {
            log::info!("Killing running AOF rewrite child");
            self.abort_bgsave("the AOF being turned off");
            self.rewrite_cleanup();
        }
        self.aof.file = None;
        self.aof.bio = None;
        self.aof.status = AofStatus::Off;
        self.aof.rewrite_scheduled = false;
        self.aof.selected_db = None;
        self.aof.buf.clear();
        self.sync_propagation();
    }

    /// CONFIG SET appendonly yes (`startAppendOnly`): writes are kept from
    /// now on; the AOF is on once a rewrite wrote its first base.
    pub fn aof_start(&mut self, now_ms: i64) -> Result<(), String> {
        if self.aof.status != AofStatus::Off {
            return Ok(());
        }
        if let Err(e) = std::fs::create_dir_all(self.aof_dir()) {
            log::warn!(
                "Can't open or create append-only dir {}: {e}",
                self.config.persist.aof.appenddirname
            );
            return Err("Can't open or create append-only dir".into());
        }
        // Files of an earlier run: their sequence numbers go on (Redis
        // reads the manifest at start whatever `appendonly` says).
        match self.aof_read_manifest() {
            Ok(Some(m)) => self.aof.manifest = m,
            Ok(None) => {}
            Err(e) => {
                log::warn!("{e}");
                return Err(e);
            }
        }
        self.aof.status = AofStatus::WaitRewrite;
        self.sync_propagation();
        if self.persist.bgsave.is_some() {
            self.aof.rewrite_scheduled = true;
            log::warn!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
            return Ok(());
        }
        if let Err(e) = self.rewrite_background(now_ms) {
            log::warn!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error.");
            self.aof.status = AofStatus::Off;
            self.sync_propagation();
            return Err(e.to_string());
        }
        Ok(())
    }

    /// On exit (`prepareForShutdown`): the buffer written and fsynced.
    pub fn aof_shutdown(&mut self, now_ms: i64) {
        if self.aof.status == AofStatus::Off {
            return;
        }
        log::info!("Calling fsync() on the AOF file.");
        self.aof_flush(true, now_ms);
        if let Some(f) = &self.aof.file {
            let _ = f.sync_data();
        }
        self.aof.bio = None;
    }

    /// Writes refused while the AOF cannot be written
    /// (`writeCommandsDeniedByDiskError`'s AOF case).
    pub fn aof_write_denied(&self) -> Option<String> {
        (self.aof.status != AofStatus::Off && !self.aof.last_write_ok)
            .then(|| err_misconf_aof(&self.aof.last_write_err))
    }

    /// INFO persistence's AOF fields.
    pub fn aof_info(&self, now_ms: i64) -> Vec<(&'static str, String)> {
        let a = &self.aof;
        let rewriting = a.rewrite.is_some();
        let mut v = vec![
            (
                "aof_enabled",
                u8::from(a.status != AofStatus::Off).to_string(),
            ),
            ("aof_rewrite_in_progress", u8::from(rewriting).to_string()),
            (
                "aof_rewrite_scheduled",
                u8::from(a.rewrite_scheduled).to_string(),
            ),
            (
                "aof_last_rewrite_time_sec",
                a.last_rewrite_time_sec.to_string(),
            ),
            (
                "aof_current_rewrite_time_sec",
                a.rewrite
                    .as_ref()
                    .map_or(-1, |r| (now_ms - r.started_ms) / 1000)
                    .to_string(),
            ),
            (
                "aof_last_bgrewrite_status",
                if a.last_rewrite_ok { "ok" } else { "err" }.into(),
            ),
            ("aof_rewrites", a.rewrites.to_string()),
            (
                "aof_rewrites_consecutive_failures",
                a.consecutive_failures.to_string(),
            ),
            (
                "aof_last_write_status",
                if a.last_write_ok { "ok" } else { "err" }.into(),
            ),
            ("aof_last_cow_size", "0".into()),
            ("module_fork_in_progress", "0".into()),
            ("module_fork_last_cow_size", "0".into()),
        ];
        if a.status != AofStatus::Off {
            let pending = a.buf.len();
            v.extend([
                ("aof_current_size", a.current_size.to_string()),
                ("aof_base_size", a.base_size.to_string()),
                (
                    "aof_pending_rewrite",
                    u8::from(a.rewrite_scheduled).to_string(),
                ),
                ("aof_buffer_length", pending.to_string()),
                (
                    "aof_pending_bio_fsync",
                    u8::from(a.bio.as_ref().is_some_and(bio::Bio::busy)).to_string(),
                ),
                ("aof_delayed_fsync", a.delayed_fsync.to_string()),
            ]);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A server with `appendfsync always` and group commit in a fresh
    /// directory, and two clients.
    fn always_server(
        tag: &str,
    ) -> (
        Server,
        std::path::PathBuf,
        crate::server::ClientId,
        crate::server::ClientId,
    ) {
        let dir = std::env::temp_dir().join(format!("gyre-aof-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut config = crate::server::Config::default();
        config.persist.dir = dir.clone();
        config.persist.aof.appendonly = true;
        config.persist.aof.appendfsync = Fsync::Always;
        let mut s = Server::new(config, 1_000);
        s.aof.status = AofStatus::On;
        s.aof.group_commit = true;
        s.aof_open_at_start(1_000).unwrap();
        s.sync_propagation();
        let a = s
            .connect("127.0.0.1:1", "127.0.0.1:6379", 7, 1_000)
            .unwrap();
        let b = s
            .connect("127.0.0.1:2", "127.0.0.1:6379", 8, 1_000)
            .unwrap();
        (s, dir, a, b)
    }

    /// `appendfsync always` with group commit: a read's replies wait
    /// until the turn's write and fsync, and nothing of them shows before.
    #[test]
    fn group_commit_holds_replies_until_the_turns_fsync() {
        let (mut s, dir, a, b) = always_server("group");
        let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
        let mut out = Vec::new();
        s.feed(
            a,
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
            1_000,
            &mut out,
        );
        assert_eq!(out, b"+OK\r\n");
        assert!(s.aof_hold_replies());
        s.hold_output(a, &out, 1_000);
        // A read-only client in the same turn waits too (its replies may
        // show the write).
        out.clear();
        s.feed(b, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 1_000, &mut out);
        assert!(s.aof_hold_replies());
        s.hold_output(b, &out, 1_000);
        assert!(s.pending_output(a).is_empty() && s.pending_output(b).is_empty());
        assert_eq!(std::fs::metadata(&incr).unwrap().len(), 0);
        s.before_sleep(1_000);
        assert!(std::fs::read(&incr)
            .unwrap()
            .ends_with(b"$1\r\nk\r\n$1\r\nv\r\n"));
        assert!(!s.aof_hold_replies());
        let mut w = s.take_writers();
        w.sort();
        assert_eq!(w, vec![a, b]);
        assert_eq!(s.pending_output(a), b"+OK\r\n");
        assert_eq!(s.pending_output(b), b"$1\r\nv\r\n");
        // No write in a turn: nothing is held.
        out.clear();
        s.feed(b, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 1_000, &mut out);
        assert!(!s.aof_hold_replies());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A BLPOP woken by another client's LPUSH: its reply waits for the
    /// fsync of the push too, then goes out.
    #[test]
    fn a_woken_blpop_answers_after_the_fsync_of_the_push() {
        let (mut s, dir, a, b) = always_server("woken");
        let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
        let mut out = Vec::new();
        let r = s.feed(
            b,
            b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n",
            1_000,
            &mut out,
        );
        assert!(r.blocked.is_some() && out.is_empty());
        s.feed(
            a,
            b"*3\r\n$5\r\nLPUSH\r\n$1\r\nq\r\n$1\r\nv\r\n",
            1_000,
            &mut out,
        );
        assert_eq!(out, b":1\r\n");
        s.hold_output(a, &out, 1_000);
        assert_eq!(s.take_woken(), vec![b]);
        // The glue's turn for the woken client, before the loop sleeps.
        s.deliver_blocked_output(b, 1_000);
        assert!(s.pending_output(b).is_empty(), "sent before the fsync");
        assert_eq!(std::fs::metadata(&incr).unwrap().len(), 0);
        s.before_sleep(1_000);
        assert!(std::fs::read_to_string(&incr).unwrap().contains("LPUSH"));
        let mut w = s.take_writers();
        w.sort();
        assert_eq!(w, vec![a, b]);
        assert_eq!(s.pending_output(b), b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n");
        s.output_sent(b, s.pending_output(b).len());
        // Without a write waiting, a woken reply is queued at once.
        out.clear();
        s.feed(
            b,
            b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n",
            1_000,
            &mut out,
        );
        s.block_timeout(b);
        s.deliver_blocked_output(b, 1_000);
        assert!(!s.aof_hold_replies());
        assert_eq!(s.pending_output(b), b"*-1\r\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
