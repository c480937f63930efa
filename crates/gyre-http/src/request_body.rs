//! Reading a client request body for a handler that wants it (nginx's
//! `ngx_http_read_client_request_body` and its save filter), with
//! `client_body_buffer_size`, `client_body_temp_path`,
//! `client_body_in_file_only` and `client_body_in_single_buffer`.
//!
//! The framing (Content-Length, chunked, `client_max_body_size` for
//! chunked bodies, `100 Continue`, `client_body_timeout`) is the
//! connection machine's collect mode ([`Connection::collect_body`]); this
//! module stores what it decodes: in memory up to the buffer size, then the
//! whole body in a temporary file (crate::temp_file). Handlers that never
//! ask for the body get it discarded by the machine after their response
//! (nginx's `ngx_http_discard_request_body`), keep-alive intact.
//!
//! The result, [`RequestBody`], is what a consumer reads: the in-memory
//! chunks in order ([`RequestBody::bufs`]) and, if the body went to disk,
//! the file ([`RequestBody::file`], which then holds all of it, as
//! nginx's). The socket reads are the connection handler's (glue): it
//! feeds the machine and calls [`pump`] until the body is complete, then
//! resumes the handler that asked ([`Post`]).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use gyre_core::event::Msec;

use crate::body::BodyKind;
use crate::conn::{Connection, Event};
use crate::temp_file::{Keep, TempFile, TempPath};

/// `client_body_in_file_only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InFileOnly {
    #[default]
    Off,
    /// Always in a file, kept after the request.
    On,
    /// Always in a file, removed after the request.
    Clean,
}

/// The body directives of one level (`None`: not set here).
#[derive(Debug, Clone, Default)]
pub struct BodySet {
    pub buffer_size: Option<u64>,
    pub temp_path: Option<Arc<TempPath>>,
    pub in_file_only: Option<InFileOnly>,
    pub single_buffer: Option<bool>,
}

/// A location's body settings after inheritance.
#[derive(Debug, Clone, Default)]
pub struct BodyConf {
    /// `client_body_buffer_size`: nginx's default is two pages (16k on
    /// x86-64).
    pub buffer_size: u64,
    /// `client_body_temp_path`; `None`: `PREFIX/client_body_temp`
    /// ([`crate::conf::HttpConf::body_temp`]).
    pub temp_path: Option<Arc<TempPath>>,
    pub in_file_only: InFileOnly,
    pub single_buffer: bool,
}

/// nginx's default `client_body_buffer_size` (2 × the 4 KiB page).
pub const DEFAULT_BUFFER_SIZE: u64 = 16 * 1024;

/// The settings from `levels` (outermost first).
pub fn resolve(levels: &[&crate::conf::LocSettings]) -> BodyConf {
    use crate::conf::pick;
    BodyConf {
        buffer_size: pick(levels, |s| s.body.buffer_size).unwrap_or(DEFAULT_BUFFER_SIZE),
        temp_path: pick(levels, |s| s.body.temp_path.clone()),
        in_file_only: pick(levels, |s| s.body.in_file_only).unwrap_or_default(),
        single_buffer: pick(levels, |s| s.body.single_buffer).unwrap_or(false),
    }
}

/// How a handler wants its body kept, beyond the location's settings
/// (nginx's `r->request_body_in_*` flags a module sets before reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// In a file whatever its size (a DAV PUT renames it into place).
    pub in_file: Option<Keep>,
    /// The file readable by the group (0660).
    pub group_access: bool,
    /// Log the temporary file's name at warn (nginx's default; a module
    /// that expects the file turns it off).
    pub log_file: bool,
}

impl Default for Want {
    /// nginx's defaults: the location's settings, the warn line.
    fn default() -> Want {
        Want {
            in_file: None,
            group_access: false,
            log_file: true,
        }
    }
}

/// A request body as read so far.
#[derive(Debug, Default)]
pub struct RequestBody {
    /// The body in memory, in order (one buffer with
    /// `client_body_in_single_buffer`); empty once it went to a file.
    pub bufs: Vec<Vec<u8>>,
    /// The temporary file holding the whole body, when it did not fit in
    /// memory (or a file was wanted).
    pub file: Option<TempFile>,
    /// Payload bytes received.
    pub len: u64,
    /// The whole body was received.
    pub done: bool,
    /// Bytes allowed in memory for this body.
    limit: u64,
    single: bool,
    in_file: Option<Keep>,
    group_access: bool,
    log_file: bool,
    temp_path: Option<Arc<TempPath>>,
}

/// What [`RequestBody::push`] did beside storing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    InMemory,
    /// The body went to this new temporary file (nginx's warn line `a
    /// client request body is buffered to a temporary file NAME`, when
    /// [`Want::log_file`]).
    Spilled {
        path: PathBuf,
        log: bool,
    },
    InFile,
}

impl RequestBody {
    /// An empty body to read a request's `kind` of body into.
    pub fn new(conf: &BodyConf, kind: BodyKind, want: Want) -> RequestBody {
        let mut rb = RequestBody::default();
        rb.reset(conf, kind, want);
        rb
    }

    /// Makes a (pooled) body ready for another request, keeping the
    /// capacity of its first buffer.
    pub fn reset(&mut self, conf: &BodyConf, kind: BodyKind, want: Want) {
        let size = conf.buffer_size;
        // nginx sizes the buffer for a Content-Length body that fits in
        // 1.25 × client_body_buffer_size to the body itself; anything
        // larger (and any chunked body) gets client_body_buffer_size and
        // goes to a file once that is full.
        self.limit = match kind {
            BodyKind::Length(n) if n < size + size / 4 => n,
            _ => size,
        };
        let mut first = self.bufs.drain(..).next().unwrap_or_default();
        first.clear();
        self.bufs.push(first);
        self.file = None;
        self.len = 0;
        self.done = matches!(kind, BodyKind::None | BodyKind::Length(0));
        self.single = conf.single_buffer;
        self.in_file = want.in_file.or(match conf.in_file_only {
            InFileOnly::Off => None,
            InFileOnly::On => Some(Keep::Persistent),
            InFileOnly::Clean => Some(Keep::Clean),
        });
        self.group_access = want.group_access;
        self.log_file = want.log_file && conf.in_file_only == InFileOnly::Off;
        self.temp_path = conf.temp_path.clone();
    }

    /// Forgets the body (its file goes: unlinked already, or removed when
    /// `clean`), keeping the first buffer's capacity for the next one.
    pub fn clear(&mut self) {
        self.bufs.truncate(1);
        if let Some(b) = self.bufs.first_mut() {
            b.clear();
        }
        self.file = None;
        self.len = 0;
        self.done = false;
    }

    /// Bytes held in memory.
    pub fn memory_len(&self) -> usize {
        self.bufs.iter().map(Vec::len).sum()
    }

    /// `$request_body`: the body when it is complete and in memory (nginx
    /// has no value while it is in a file).
    pub fn in_memory(&self) -> Option<impl Iterator<Item = &[u8]>> {
        (self.done && self.file.is_none()).then(|| self.bufs.iter().map(Vec::as_slice))
    }

    /// Stores decoded bytes: in memory while they fit, otherwise the
    /// whole body goes to a temporary file under `default_path` (or the
    /// location's `client_body_temp_path`).
    pub fn push(&mut self, data: &[u8], default_path: &TempPath) -> io::Result<Stored> {
        self.len += data.len() as u64;
        if let Some(f) = &mut self.file {
            f.write(data)?;
            return Ok(Stored::InFile);
        }
        let fits = (self.memory_len() + data.len()) as u64 <= self.limit;
        if fits && self.in_file.is_none() {
            match self.bufs.last_mut() {
                Some(b) if self.single || b.is_empty() => b.extend_from_slice(data),
                _ => self.bufs.push(data.to_vec()),
            }
            return Ok(Stored::InMemory);
        }
        if fits {
            // In a file in the end, but written when full or complete
            // (nginx writes a buffer at a time).
            match self.bufs.last_mut() {
                Some(b) => b.extend_from_slice(data),
                None => self.bufs.push(data.to_vec()),
            }
            return Ok(Stored::InMemory);
        }
        let path = self.spill(default_path)?;
        if let Some(f) = &mut self.file {
            f.write(data)?;
        }
        Ok(Stored::Spilled {
            path,
            log: self.log_file,
        })
    }

    /// The body is complete: a body wanted in a file is written there now
    /// (an empty file for an empty body, as nginx's).
    pub fn finish(&mut self, default_path: &TempPath) -> io::Result<Option<PathBuf>> {
        self.done = true;
        if self.file.is_none() && self.in_file.is_some() {
            return self.spill(default_path).map(Some);
        }
        Ok(None)
    }

    /// Moves what is in memory into a new temporary file.
    fn spill(&mut self, default_path: &TempPath) -> io::Result<PathBuf> {
        let tp = self.temp_path.as_deref().unwrap_or(default_path);
        let keep = self.in_file.unwrap_or(Keep::Unlinked);
        let mut f = TempFile::create(tp, keep, self.group_access)?;
        for b in &self.bufs {
            f.write(b)?;
        }
        self.bufs.truncate(1);
        if let Some(b) = self.bufs.first_mut() {
            b.clear();
        }
        let path = f.path().to_path_buf();
        self.file = Some(f);
        Ok(path)
    }

    /// `$request_body_file`: the file's name while it has one.
    pub fn file_name(&self) -> Option<&std::path::Path> {
        self.file
            .as_ref()
            .filter(|f| f.keep() != Keep::Unlinked)
            .map(TempFile::path)
    }

    /// The whole body in memory, for a consumer that wants it so (reads
    /// the file back when it is there).
    pub fn to_vec(&self) -> io::Result<Vec<u8>> {
        if let Some(f) = &self.file {
            let mut v = vec![0; f.len() as usize];
            f.read_at(&mut v, 0)?;
            return Ok(v);
        }
        Ok(self.bufs.concat())
    }
}

/// `client_body_buffer_size SIZE`.
pub fn set_buffer_size(
    c: &mut crate::conf::HttpConf,
    d: &gyre_core::conf::Directive,
    cx: &gyre_core::conf::ConfCtx,
) -> Result<(), String> {
    let v = d.size(0)? as u64;
    c.settings(cx)?.body.buffer_size = Some(v);
    Ok(())
}

/// `client_body_temp_path PATH [L1 [L2 [L3]]]` (relative to the prefix).
pub fn set_temp_path(
    c: &mut crate::conf::HttpConf,
    d: &gyre_core::conf::Directive,
    cx: &gyre_core::conf::ConfCtx,
) -> Result<(), String> {
    let levels: Vec<&str> = d.args.iter().skip(1).map(String::as_str).collect();
    let tp = TempPath::parse(cx.full_path(d.arg(0)), &levels).map_err(|e| d.error(e))?;
    c.settings(cx)?.body.temp_path = Some(Arc::new(tp));
    Ok(())
}

/// `client_body_in_file_only on|clean|off`.
pub fn set_in_file_only(
    c: &mut crate::conf::HttpConf,
    d: &gyre_core::conf::Directive,
    cx: &gyre_core::conf::ConfCtx,
) -> Result<(), String> {
    let v = match d.arg(0) {
        "off" => InFileOnly::Off,
        "on" => InFileOnly::On,
        "clean" => InFileOnly::Clean,
        other => return Err(format!("invalid value \"{other}\"")),
    };
    c.settings(cx)?.body.in_file_only = Some(v);
    Ok(())
}

/// `client_body_in_single_buffer on|off`.
pub fn set_single_buffer(
    c: &mut crate::conf::HttpConf,
    d: &gyre_core::conf::Directive,
    cx: &gyre_core::conf::ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.body.single_buffer = Some(v);
    Ok(())
}

/// What the handler that asked for the body does once it is read (nginx's
/// `post_handler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Post {
    /// `dav_methods PUT` (crate::dav).
    DavPut,
}

/// Starts reading the request's body for a content handler (nginx's
/// `ngx_http_read_client_request_body`): the machine collects it (and
/// sends `100 Continue` when asked), the request is suspended until the
/// connection handler has it all ([`pump`]), then `post` runs.
pub fn start(
    cx: &mut crate::phases::Ctx<'_>,
    r: &mut crate::request::HttpRequest,
    want: Want,
    post: Post,
) -> crate::phases::Step {
    begin(cx, r, want);
    r.content = crate::request::Content::ReadBody(post);
    r.wake = Some(crate::request::Wake::Body);
    crate::phases::Step::Again
}

/// A fresh (or reused) [`RequestBody`] in `r` for its location, and the
/// machine set to collect the body into it ([`collect`]); the caller
/// drives [`pump`].
pub fn begin(cx: &mut crate::phases::Ctx<'_>, r: &mut crate::request::HttpRequest, want: Want) {
    let loc = r.st.loc.clone();
    let kind = r.st.req.body;
    match &mut r.st.body {
        Some(b) => b.reset(&loc.body, kind, want),
        None => r.st.body = Some(Box::new(RequestBody::new(&loc.body, kind, want))),
    }
    collect(cx, &loc);
}

/// The machine collects the body under the location's rules: its
/// `client_body_timeout`, its `client_max_body_size` for a chunked body
/// (the machine's limit is otherwise 0: the Content-Length check is
/// find-config's), and its access log for the records the machine writes
/// itself (a 408, a 413). Also for a body streamed without storing.
pub fn collect(cx: &mut crate::phases::Ctx<'_>, loc: &crate::conf::LocConf) {
    let st = cx.m.settings_mut();
    st.client_body_timeout = loc.client_body_timeout;
    let max = std::mem::replace(&mut st.client_max_body_size, loc.client_max_body_size);
    cx.m.collect_body();
    cx.m.settings_mut().client_max_body_size = max;
    let sink = crate::phases::log_sink(cx, loc);
    cx.m.set_log_sink(sink);
}

/// The outcome of one [`pump`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pumped {
    /// More body bytes are needed (read the socket, call again).
    Again,
    /// The body is complete.
    Done,
    /// The machine ended the request itself: a framing error or a body
    /// over `client_max_body_size` (its 400 / 413 is queued), the client
    /// went away (400) or timed out (408). Only the log phase is left.
    Ended(u16),
    /// Storing failed (a temporary file could not be written): 500.
    Failed,
}

/// Takes what the machine decoded from its input into `rb` (held out of
/// `r` meanwhile), writing the lines nginx writes in `r`'s context: the
/// temporary file's name at warn, a failed write at crit.
pub fn pump(
    m: &mut Connection,
    rb: &mut RequestBody,
    conf: &crate::conf::HttpConf,
    r: &crate::request::HttpRequest,
    now: Msec,
    date: &str,
) -> Pumped {
    let failed = |e: io::Error| {
        gyre_core::log_ctx!(crit, &crate::log_error::req(conf, r), "{e}");
        Pumped::Failed
    };
    // Bounded: each event consumes input or ends the body.
    for _ in 0..4096 {
        let ev = m.poll(now, date);
        match ev {
            Some(Event::Body(b)) => match rb.push(&b, &conf.body_temp) {
                Ok(Stored::Spilled { path, log: true }) => gyre_core::log_ctx!(
                    gyre_core::errlog::WARN,
                    &crate::log_error::req(conf, r),
                    "a client request body is buffered to a temporary file {}",
                    path.display()
                ),
                Ok(_) => {}
                Err(e) => return failed(e),
            },
            Some(Event::BodyEnd) => {
                return match rb.finish(&conf.body_temp) {
                    Ok(_) => Pumped::Done,
                    Err(e) => failed(e),
                };
            }
            Some(Event::BodyError(status)) => return Pumped::Ended(status),
            Some(Event::Request(_)) | None => {
                if m.wants_close() {
                    return Pumped::Ended(m.ended_status().unwrap_or(400));
                }
                return Pumped::Again;
            }
        }
    }
    Pumped::Again
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(size: u64) -> BodyConf {
        BodyConf {
            buffer_size: size,
            ..BodyConf::default()
        }
    }

    fn tmp(name: &str) -> TempPath {
        let d = std::env::temp_dir().join(format!("gyre-rb-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempPath::new(d)
    }

    #[test]
    fn small_body_stays_in_memory() {
        let tp = tmp("small");
        let mut rb = RequestBody::new(&conf(16), BodyKind::Length(10), Want::default());
        assert_eq!(rb.push(b"hello", &tp).unwrap(), Stored::InMemory);
        assert_eq!(rb.push(b"world", &tp).unwrap(), Stored::InMemory);
        assert!(rb.in_memory().is_none(), "not complete yet");
        assert_eq!(rb.finish(&tp).unwrap(), None);
        let v: Vec<u8> = rb.in_memory().unwrap().flatten().copied().collect();
        assert_eq!(v, b"helloworld");
        assert!(rb.file.is_none() && rb.file_name().is_none());
    }

    #[test]
    fn content_length_up_to_a_quarter_more_fits_as_nginx() {
        let tp = tmp("quarter");
        // 19 < 16 + 4: one buffer of 19 bytes.
        let mut rb = RequestBody::new(&conf(16), BodyKind::Length(19), Want::default());
        assert_eq!(rb.push(&[b'x'; 19], &tp).unwrap(), Stored::InMemory);
        // 20 is not: a 16-byte buffer, then the file.
        let mut rb = RequestBody::new(&conf(16), BodyKind::Length(20), Want::default());
        assert_eq!(rb.push(&[b'x'; 10], &tp).unwrap(), Stored::InMemory);
        match rb.push(&[b'y'; 10], &tp).unwrap() {
            Stored::Spilled { path, log } => {
                assert!(log);
                assert!(!path.exists(), "unlinked after open");
            }
            other => panic!("{other:?}"),
        }
        rb.finish(&tp).unwrap();
        assert!(
            rb.in_memory().is_none(),
            "$request_body is empty for a file"
        );
        assert_eq!(rb.to_vec().unwrap(), [[b'x'; 10], [b'y'; 10]].concat());
        assert_eq!(rb.memory_len(), 0);
        let _ = std::fs::remove_dir_all(&tp.dir);
    }

    #[test]
    fn chunked_spills_past_the_buffer() {
        let tp = tmp("chunked");
        let mut rb = RequestBody::new(&conf(8), BodyKind::Chunked, Want::default());
        rb.push(b"12345678", &tp).unwrap();
        assert!(rb.file.is_none());
        assert!(matches!(
            rb.push(b"9", &tp).unwrap(),
            Stored::Spilled { .. }
        ));
        assert_eq!(rb.push(b"0", &tp).unwrap(), Stored::InFile);
        rb.finish(&tp).unwrap();
        assert_eq!(rb.to_vec().unwrap(), b"1234567890");
        assert_eq!(rb.len, 10);
        let _ = std::fs::remove_dir_all(&tp.dir);
    }

    #[test]
    fn in_file_only_keeps_a_named_file_even_when_empty() {
        let tp = tmp("infile");
        let mut c = conf(16);
        c.in_file_only = InFileOnly::On;
        let mut rb = RequestBody::new(&c, BodyKind::Length(0), Want::default());
        let p = rb.finish(&tp).unwrap().unwrap();
        assert!(p.exists());
        assert_eq!(rb.file_name(), Some(p.as_path()));
        drop(rb);
        assert!(p.exists(), "on: kept");
        c.in_file_only = InFileOnly::Clean;
        let mut rb = RequestBody::new(&c, BodyKind::Length(3), Want::default());
        rb.push(b"abc", &tp).unwrap();
        let p = rb.finish(&tp).unwrap().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        drop(rb);
        assert!(!p.exists(), "clean: removed");
        let _ = std::fs::remove_dir_all(&tp.dir);
    }

    #[test]
    fn single_buffer_is_one_buffer() {
        let tp = tmp("single");
        let mut c = conf(64);
        c.single_buffer = true;
        let mut rb = RequestBody::new(&c, BodyKind::Chunked, Want::default());
        for part in [&b"ab"[..], b"cd", b"ef"] {
            rb.push(part, &tp).unwrap();
        }
        rb.finish(&tp).unwrap();
        assert_eq!(rb.bufs, vec![b"abcdef".to_vec()]);
        let mut rb = RequestBody::new(&conf(64), BodyKind::Chunked, Want::default());
        for part in [&b"ab"[..], b"cd"] {
            rb.push(part, &tp).unwrap();
        }
        assert_eq!(rb.bufs.len(), 2);
    }
}
