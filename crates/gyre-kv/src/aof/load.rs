//! Loading the append-only file at start (Redis's `loadAppendOnlyFiles`
//! and `loadSingleAppendOnlyFile`), and opening it for appending
//! (`aofOpenIfNeededOnServerStart`).
//!
//! The manifest names the base (an RDB, or commands) and the incremental
//! files. An RDB base is read in slices by the RDB loader (clients get
//! `-LOADING` meanwhile, INFO shows the progress); then the command files
//! are replayed in order, in one go, through the command table, as by a
//! client with no connection (no propagation: the AOF is not yet open).
//! A MULTI … EXEC is executed at its EXEC, so a transaction torn at the
//! end is not half applied. A file that ends inside a command is a
//! truncated AOF: with `aof-load-truncated yes` and in the last file, it
//! is cut back to the last complete command with Redis's log lines;
//! otherwise, as any malformed or unknown command, the start stops with
//! Redis's message (never a silently empty dataset).

use std::path::Path;
use std::time::Instant;

use super::manifest::{self, Manifest};
use super::AofStatus;
use crate::cmd::Ctx;
use crate::resp::Argv;
use crate::server::Server;

/// An AOF being loaded: the files after the RDB base.
#[derive(Debug)]
pub struct AofLoad {
    manifest: Manifest,
    files: Vec<(String, bool)>,
    base_rdb: Option<String>,
    total: u64,
    started: Instant,
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

    /// Replay a command file; how it ended.
    fn aof_load_commands(
        &mut self,
        path: &Path,
        name: &str,
        now_ms: i64,
    ) -> Result<Ending, String> {
        let b = std::fs::read(path).map_err(|e| {
            format!("Fatal error: can't open the append log file {name} for reading: {e}")
        })?;
        let bad = || {
            format!("Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>")
        };
        let mut pos = 0;
        let mut db = 0usize;
        let mut multi: Option<(usize, Vec<Vec<Vec<u8>>>)> = None;
        if b.starts_with(b"REDIS") {
            // An RDB preamble then commands: an old single-file AOF.
            log::info!("Reading RDB preamble from AOF file...");
            let lim = self.config.encodings;
            let check = self.config.persist.rdbchecksum;
            let mut l = crate::rdb::load::Loader::start(&b[..]).map_err(|e| {
                format!("Error reading the RDB preamble of the AOF file {name}, AOF loading aborted: {e}")
            })?;
            while !l.step(&mut self.dbs, &lim, now_ms, check, u64::MAX).map_err(|e| {
                format!("Error reading the RDB preamble of the AOF file {name}, AOF loading aborted: {e}")
            })? {}
            pos = l.offset() as usize;
            log::info!("Reading the remaining AOF tail...");
        }
        while pos < b.len() {
            if b[pos] == b'#' {
                // An annotation (`#TS:...`): skip the line.
                match b[pos..].windows(2).position(|w| w == b"\r\n") {
                    Some(e) => {
                        pos += e + 2;
                        continue;
                    }
                    None => {
                        return Ok(Ending::Truncated {
                            valid: pos as u64,
                            multi: false,
                        })
                    }
                }
            }
            let start = pos;
            let (argv, next) = match parse_command(&b, pos) {
                Ok(Some(c)) => c,
                Ok(None) => {
                    return Ok(match multi {
                        Some((m, _)) => Ending::Truncated {
                            valid: m as u64,
                            multi: true,
                        },
                        None => Ending::Truncated {
                            valid: start as u64,
                            multi: false,
                        },
                    })
                }
                Err(()) => return Err(bad()),
            };
            pos = next;
            if is(&argv[0], "multi") {
                multi = Some((start, Vec::new()));
                continue;
            }
            if is(&argv[0], "exec") {
                if let Some((_, q)) = multi.take() {
                    for c in q {
                        self.aof_replay(&mut db, &c, now_ms, name)?;
                    }
                }
                continue;
            }
            match multi.as_mut() {
                Some((_, q)) => q.push(argv),
                None => self.aof_replay(&mut db, &argv, now_ms, name)?,
            }
        }
        Ok(match multi {
            Some((m, _)) => Ending::Truncated {
                valid: m as u64,
                multi: true,
            },
            None => Ending::Clean,
        })
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
    /// stop, with the message to log. An RDB base is loaded in slices by
    /// [`Server::load_slice`] (clients get `-LOADING` meanwhile); the
    /// command files follow in [`Server::aof_load_slice`]'s last call.
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
        let mut total = 0;
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
                });
                total = size;
                base_rdb = Some(name.clone());
                files.remove(0);
            }
        }
        self.aof.loading = Some(AofLoad {
            manifest: m,
            files,
            base_rdb,
            total,
            started: Instant::now(),
        });
        Ok(true)
    }

    /// One loading slice; `Ok(true)` when the AOF is loaded and open for
    /// appending.
    pub fn aof_load_slice(&mut self, now_ms: i64) -> Result<bool, String> {
        if self.persist.loading.is_some() {
            let name = self
                .aof
                .loading
                .as_ref()
                .and_then(|l| l.base_rdb.clone())
                .unwrap_or_default();
            match self.load_slice(now_ms) {
                Ok(false) => return Ok(false),
                Ok(true) => log::info!("RDB is base AOF"),
                Err(e) => {
                    return Err(format!(
                        "Error reading the RDB base file {name}, AOF loading aborted: {e}"
                    ))
                }
            }
        }
        let Some(l) = self.aof.loading.take() else {
            return Ok(true);
        };
        let dir = self.aof_dir();
        let mut total = l.total;
        let files = l.files;
        let last = files.len().saturating_sub(1);
        for (n, (name, is_base)) in files.iter().enumerate() {
            let path = dir.join(name);
            let t0 = Instant::now();
            {
                match self.aof_load_commands(&path, name, now_ms)? {
                    Ending::Clean => {}
                    Ending::Truncated { valid, multi } => {
                        if n != last || !self.config.persist.aof.load_truncated {
                            return Err(format!("Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."));
                        }
                        if multi {
                            log::warn!(
                                "Revert incomplete MULTI/EXEC transaction in AOF file {name}"
                            );
                        } else {
                            log::warn!(
                                "!!! Warning: short read while loading the AOF file {name}!!!"
                            );
                        }
                        log::warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
                        let r = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .and_then(|f| f.set_len(valid).and_then(|()| f.sync_all()));
                        if let Err(e) = r {
                            return Err(format!("Error truncating the AOF file {name}: {e}"));
                        }
                        log::warn!(
                            "AOF {name} loaded anyway because aof-load-truncated is enabled"
                        );
                    }
                }
            }
            total += std::fs::metadata(&path).map_or(0, |m| m.len());
            log::info!(
                "DB loaded from {} file {name}: {:.3} seconds",
                if *is_base { "base" } else { "incr" },
                t0.elapsed().as_secs_f64()
            );
        }
        self.aof.manifest = l.manifest;
        self.aof.current_size = total;
        self.aof.base_size = total;
        self.dirty = 0;
        log::info!(
            "DB loaded from append only file: {:.3} seconds",
            l.started.elapsed().as_secs_f64()
        );
        self.aof_open_at_start(now_ms)?;
        self.sync_propagation();
        Ok(true)
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
