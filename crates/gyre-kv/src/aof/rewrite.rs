//! BGREWRITEAOF (Redis's `rewriteAppendOnlyFileBackground` and
//! `backgroundRewriteDoneHandler`) without fork(): the new base file is
//! written by the same point-in-time sweep as BGSAVE ([`crate::persist`],
//! [`crate::db`]'s `snapshot`), as an RDB with `aof-base` set when
//! `aof-use-rdb-preamble yes` or as commands ([`put_rewrite_kv`]) when
//! not. At the start the buffer is flushed and a new incremental file
//! opened, so the sweep's snapshot and the new file's commands meet at one
//! instant; when the base is on disk the manifest names the new base and
//! the new incremental file, and the old files, now history, are removed.

use std::io;

use super::manifest::{self, FileKind, Manifest};
use super::propagate::cat_command;
use super::{AofStatus, Fsync};
use crate::db::Ref;
use crate::object::Object;
use crate::server::Server;
use crate::t_hash::HashObj;
use crate::t_set::SetObj;

/// Redis's `AOF_REWRITE_ITEMS_PER_CMD`: elements per RPUSH / SADD / ZADD /
/// HMSET of a rewritten aggregate.
pub const ITEMS_PER_CMD: usize = 64;

/// A rewrite in progress.
#[derive(Debug)]
pub struct Pending {
    /// The base file being written.
    pub base_name: String,
    pub rdb: bool,
    pub started_ms: i64,
    pub started: std::time::Instant,
}

pub const ERR_REWRITE_IN_PROGRESS: &str =
    "ERR Background append only file rewriting already in progress";

/// One key as the commands that rebuild it (`rewriteAppendOnlyFileRio`).
pub fn put_rewrite_kv(out: &mut Vec<u8>, key: &[u8], v: Ref<'_>, expire: Option<i64>) {
    match v {
        Ref::Str(s) => cat_command(out, &[b"SET", key, s]),
        Ref::Obj(o) => {
            put_rewrite_part(out, key, o, 0, usize::MAX, usize::MAX);
        }
    }
    if let Some(ms) = expire {
        put_rewrite_expire(out, key, ms);
    }
}

/// A key's TTL, after the commands that rebuild it.
pub(crate) fn put_rewrite_expire(out: &mut Vec<u8>, key: &[u8], ms: i64) {
    cat_command(out, &[b"PEXPIREAT", key, ms.to_string().as_bytes()]);
}

/// The commands that rebuild elements `from..to` of aggregate `o` (list
/// entries, set members, hash fields, sorted-set members; in the order
/// of [`put_rewrite_kv`]): whole commands of up to [`ITEMS_PER_CMD`]
/// elements until at least `budget` elements are written (the resumable
/// rewrite of a big key, [`crate::rdb::resume`], calls it a few commands
/// at a time). Returns where it stopped.
pub(crate) fn put_rewrite_part(
    out: &mut Vec<u8>,
    key: &[u8],
    o: &Object,
    from: usize,
    to: usize,
    budget: usize,
) -> usize {
    let to = to.min(o.len());
    let (mut at, mut done) = (from, 0);
    while at < to && done < budget {
        let n = ITEMS_PER_CMD.min(to - at);
        put_batch(out, key, o, at, n);
        at += n;
        done += n;
    }
    at
}

/// One `RPUSH` / `SADD` / `HMSET` / `ZADD` of elements `at..at + n`.
fn put_batch(out: &mut Vec<u8>, key: &[u8], o: &Object, at: usize, n: usize) {
    // Elements that are not bytes in the value (integers of an intset,
    // scores; a skiplist's members are copied with their scores).
    let mut owned: Vec<Vec<u8>> = Vec::new();
    let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * n);
    match o {
        Object::List(l) => {
            args.extend([&b"RPUSH"[..], key]);
            args.extend(l.range(at, n));
        }
        Object::Set(SetObj::Table(d)) => {
            args.extend([&b"SADD"[..], key]);
            args.extend((at..at + n).filter_map(|i| d.entry(i)).map(|(m, _)| m));
        }
        Object::Set(SetObj::Intset(s)) => {
            owned.extend(
                s.iter()
                    .skip(at)
                    .take(n)
                    .map(|x| x.to_string().into_bytes()),
            );
            args.extend([&b"SADD"[..], key]);
            args.extend(owned.iter().map(Vec::as_slice));
        }
        Object::Hash(HashObj::Table(d)) => {
            args.extend([&b"HMSET"[..], key]);
            for (f, v) in (at..at + n).filter_map(|i| d.entry(i)) {
                args.extend([f, v]);
            }
        }
        Object::Hash(HashObj::Listpack(lp)) => {
            args.extend([&b"HMSET"[..], key]);
            args.extend(lp.iter().skip(2 * at).take(2 * n));
        }
        Object::Zset(z) => {
            z.visit(at, at + n, false, |m, s| {
                owned.push(crate::zset::score::format(s).into_bytes());
                owned.push(m.to_vec());
            });
            args.extend([&b"ZADD"[..], key]);
            args.extend(owned.iter().map(Vec::as_slice));
        }
    }
    cat_command(out, &args);
}

impl Server {
    pub fn aof_rewrite_in_progress(&self) -> bool {
        self.aof.rewrite.is_some()
    }

    /// Start a rewrite (`rewriteAppendOnlyFileBackground`).
    pub fn rewrite_background(&mut self, now_ms: i64) -> io::Result<()> {
        if self.persist.bgsave.is_some() {
            return Err(io::Error::other("another background operation is running"));
        }
        self.aof.rewrite_scheduled = false;
        let filename = self.config.persist.aof.appendfilename.clone();
        let dir = self.aof_dir();
        std::fs::create_dir_all(&dir)?;
        // The new incremental file: writes from now on go there. With the
        // AOF on it joins the manifest at once (a crash during the rewrite
        // loads old base + old incrs + this one); while turning the AOF on
        // only the finished rewrite names it.
        let mut m = self.aof.manifest.clone();
        let incr = m.new_incr(&filename);
        let file = self.aof_open_incr(&incr, true)?;
        if self.aof.status == AofStatus::On {
            manifest::persist(&dir, &filename, &m)?;
        }
        self.aof.manifest = m;
        self.aof_switch_file(file, 0, now_ms);
        log::info!("Creating AOF incr file {incr} on background rewrite");
        let rdb = self.config.persist.aof.use_rdb_preamble;
        let base_name = format!(
            "{filename}.{}{}{}",
            self.aof.manifest.curr_base_seq + 1,
            manifest::BASE_SUFFIX,
            if rdb {
                manifest::RDB_EXT
            } else {
                manifest::AOF_EXT
            }
        );
        let kind = crate::persist::SaveKind::AofBase { rdb };
        if let Err(e) = self.sweep_start(dir.join(&base_name), kind, now_ms) {
            log::warn!("Can't rewrite append only file in background: {e}");
            self.aof.last_rewrite_ok = false;
            self.aof.consecutive_failures += 1;
            return Err(e);
        }
        self.aof.rewrite = Some(Pending {
            base_name,
            rdb,
            started_ms: now_ms,
            started: std::time::Instant::now(),
        });
        log::info!(
            "Background append only file rewriting started by pid {}",
            std::process::id()
        );
        Ok(())
    }

    /// The sweep of a rewrite ended (`backgroundRewriteDoneHandler`).
    pub(crate) fn rewrite_done(&mut self, r: io::Result<u64>, now_ms: i64) {
        let Some(p) = self.aof.rewrite.take() else {
            return;
        };
        self.aof.last_rewrite_time_sec = p.started.elapsed().as_secs() as i64;
        let size = match r {
            Ok(n) => n,
            Err(e) => {
                log::warn!("Background AOF rewrite terminated with error: {e}");
                self.rewrite_failed();
                return;
            }
        };
        log::info!("Background AOF rewrite terminated with success");
        let filename = self.config.persist.aof.appendfilename.clone();
        let dir = self.aof_dir();
        let mut m: Manifest = self.aof.manifest.clone();
        let name = m.new_base(&filename, p.rdb);
        if name != p.base_name {
            log::warn!(
                "Background AOF rewrite wrote {} but the manifest expected {name}",
                p.base_name
            );
            self.rewrite_failed();
            return;
        }
        m.mark_rewritten_incrs_history();
        if let Err(e) = manifest::persist(&dir, &filename, &m) {
            log::warn!("Error trying to write the AOF manifest file: {e}");
            self.rewrite_failed();
            return;
        }
        log::info!(
            "Successfully renamed the temporary AOF base file temp-rewriteaof-bg-{}.rdb into {name}",
            std::process::id()
        );
        // The incr file written during the rewrite is what follows the
        // base: the sizes start again from there.
        self.aof.base_size = size;
        self.aof.current_size = size + self.aof.incr_size + self.aof.buf.len() as u64;
        let history = std::mem::take(&mut m.history);
        self.aof.manifest = m;
        // `aofDelHistoryFiles`: the files go, then the manifest forgets them.
        for h in &history {
            debug_assert_eq!(h.kind, FileKind::History);
            log::info!("Removing the history file {} in the background", h.name);
            let _ = std::fs::remove_file(dir.join(&h.name));
        }
        if !history.is_empty() {
            if let Err(e) = manifest::persist(&dir, &filename, &self.aof.manifest) {
                log::warn!("Error trying to write the AOF manifest file: {e}");
            }
        }
        if self.aof.status == AofStatus::WaitRewrite {
            self.aof.status = AofStatus::On;
            log::info!("AOF rewrite finished successfully; AOF is now enabled (appendonly yes)");
        }
        self.aof.last_rewrite_ok = true;
        self.aof.consecutive_failures = 0;
        self.aof.rewrites += 1;
        if self.config.persist.aof.appendfsync == Fsync::Always {
            if let Some(f) = &self.aof.file {
                let _ = f.sync_data();
            }
        }
        let _ = now_ms;
        log::info!("Background AOF rewrite finished successfully");
    }

    fn rewrite_failed(&mut self) {
        self.aof.last_rewrite_ok = false;
        self.aof.consecutive_failures += 1;
        self.rewrite_cleanup();
        if self.aof.status == AofStatus::WaitRewrite {
            // Redis retries the rewrite from serverCron while turning on.
            self.aof.rewrite_scheduled = true;
        }
    }

    /// A rewrite that will not finish: its temp base goes (the sweep's
    /// writer removes its own temp file).
    pub(crate) fn rewrite_cleanup(&mut self) {
        self.aof.rewrite = None;
    }
}
