//! The body of a proxied response, from the upstream to the client
//! (nginx's event pipe, `ngx_event_pipe.c`, and
//! `ngx_http_upstream_process_non_buffered_request`).
//!
//! The body is decoded from the upstream's framing and queued on the
//! client's connection machine. What the machine holds in memory is
//! bounded: with buffering, `proxy_buffers` (at least `proxy_buffer_size`);
//! without (`proxy_buffering off`, `X-Accel-Buffering: no`), one
//! `proxy_buffer_size`. When the client is slower than that and buffering
//! is on, the rest goes to a temp file (`proxy_temp_path`, unlinked at
//! once, at most `proxy_temp_file_write_size` per write, at most
//! `proxy_max_temp_file_size` in all), so the upstream is read at its own
//! pace and released as soon as its response is complete; the client is
//! then sent the file with sendfile. With `proxy_max_temp_file_size 0`, or
//! once the file is full, reading stops until the client takes data.
//!
//! Ordering: once bytes wait in the file, every later byte goes to the file
//! too, and the file's bytes are handed to the machine as one region when
//! its queue ran empty (or when the body is complete), so the machine's
//! segments stay few and in order.

use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use gyre_core::conn::ConnId;
use gyre_core::errlog::{ERROR, WARN};
use gyre_core::event::{Core, Ev};
use gyre_core::sys_error_text;

use super::handler::{log_crit, log_line, Env, Flow, Proxy, Turn};
use super::next::close_upstream;
use crate::request::HttpRequest;
use crate::response::Body;
use crate::static_file::FileInfo;
use crate::temp_file::{self, Keep, TempFile};
use crate::upstream::http_response::PREMATURE_CLOSE;
use crate::upstream::Outcome;

const READING: &str = "reading upstream";

/// The most read from the upstream at once (the pooled read buffer's
/// size): larger `proxy_buffers` are filled in several reads.
const READ_MAX: usize = 64 * 1024;

/// A response's temp file: shared with the connection's open files (its
/// regions are sent from there), written at `written`, handed to the
/// machine up to `queued`.
#[derive(Debug)]
pub struct Spill {
    info: Rc<FileInfo>,
    token: u64,
    name: PathBuf,
    written: u64,
    queued: u64,
}

impl Spill {
    /// Bytes in the file the client was not handed yet.
    fn unqueued(&self) -> u64 {
        self.written - self.queued
    }
}

pub(super) fn relay_body(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let Some(u) = p.u else {
        let _ = env.cx.m.abort_body(core.now());
        return Turn::End(Flow::Done);
    };
    if p.timed_out.take().is_some() {
        log_line(
            env,
            r,
            p,
            ERROR,
            READING,
            "upstream timed out (110: Connection timed out)",
        );
        return abort(core, env, r, p);
    }
    let buffered = !p.unbuffered;
    let max = if buffered {
        p.conf.max_pending()
    } else {
        p.conf.buffer_size
    };
    let size = p.conf.buffers.1.max(p.conf.buffer_size);
    let may_spill = buffered && p.conf.max_temp_file_size > 0;
    let mut progress = false;
    // The read timeout starts again with traffic: re-armed once, when the
    // request waits again (the clock does not move within a call), not
    // after every read.
    // Bounded: each pass relays bytes or stops.
    for _ in 0..256 {
        // The client stopped taking data (only then may the body spill).
        let blocked = !core.conn(env.client).is_some_and(|x| x.write.ready);
        // Bytes already read (with the head, or left by the last pass).
        if !p.buf.is_empty() {
            p.out.clear();
            let Some(reader) = p.reader.as_mut() else {
                return abort(core, env, r, p);
            };
            match reader.feed(&p.buf, &mut p.out) {
                Ok(used) => {
                    p.buf.drain(..used);
                }
                Err(e) => {
                    log_line(env, r, p, ERROR, READING, e.text());
                    return abort(core, env, r, p);
                }
            }
            if !p.out.is_empty() {
                let waiting = p.spill.as_ref().is_some_and(|s| s.unqueued() > 0);
                if waiting || (may_spill && blocked && env.cx.m.output_pending() >= max) {
                    if let Err(e) = spill(env, r, p) {
                        log_crit(env, r, p, READING, &e);
                        return abort(core, env, r, p);
                    }
                } else {
                    let _ = env.cx.m.send_body_bytes(&p.out);
                    progress = true;
                }
            }
        }
        if !env.cx.m.has_output() && queue_file(env, p) {
            progress = true;
        }
        if p.reader.as_ref().is_some_and(|b| b.is_done()) {
            return finish(core, env, r, p);
        }
        let (room, to_file) = read_room(env, p, max, size, may_spill && blocked);
        if room == 0 {
            // The client is slower and nothing more may be held: stop
            // reading until it took some.
            core.del_timer(Ev::read(u));
            return wait(progress);
        }
        if !core.conn(u).is_some_and(|x| x.read.ready) {
            core.add_timer(Ev::read(u), p.conf.read_timeout);
            return wait(progress);
        }
        // Received into the pooled read buffer (kept at its length: zeroed
        // once, not before each read). A body that needs no decoding, for
        // the client's memory, is queued from there (one copy); other bytes
        // (chunks to decode, bytes for the temp file) go through `p.buf`.
        let identity = p.reader.as_ref().and_then(|b| b.identity_left());
        let direct = identity.filter(|_| !to_file && p.buf.is_empty());
        // At most READ_MAX a read: the buffer stays small in the pool.
        let room = room.min(READ_MAX);
        let want = direct.map_or(room, |left| {
            (left.min(usize::MAX as u64) as usize).min(room)
        });
        if p.rbuf.len() < want {
            p.rbuf.resize(want, 0);
        }
        // Spliced only while nothing else waits for the client (queued
        // bytes, the head, go first). Where a temp file may take the body,
        // only while the client takes data: what it does not take at once
        // is read back into the buffers (`splice_body`), its write is then
        // blocked and the buffered path goes on, into the file once the
        // buffers are full, so a client that stopped reading does not hold
        // the upstream (nginx's event pipe writes to the client as long as
        // it can, and to the file only then).
        if direct.is_some()
            && (!may_spill || !blocked)
            && !env.cx.m.has_output()
            && splices(core, env, u)
        {
            if let Some(t) = splice_body(core, env, r, p, u, want) {
                return t;
            }
            continue;
        }
        match core.recv(u, &mut p.rbuf[..want]) {
            Ok(0) => return end_of_stream(core, env, r, p),
            Ok(n) => {
                r.st.upstream.received(n as u64);
                if direct.is_some() {
                    let _ = env.cx.m.send_body_bytes(&p.rbuf[..n]);
                    if let Some(b) = p.reader.as_mut() {
                        b.took(n);
                    }
                    progress = true;
                } else {
                    p.buf.extend_from_slice(&p.rbuf[..n]);
                }
            }
            Err(e) => return recv_failed(core, env, r, p, u, &e, progress),
        }
    }
    core.add_timer(Ev::read(u), p.conf.read_timeout);
    // Yield with bytes still waiting on the upstream: no event will say so
    // again (edge-triggered), and the glue does not call back while the
    // client is blocked, so the next turn goes on reading.
    if core.conn(u).is_some_and(|x| x.read.ready) {
        core.post(Ev::write(env.client));
    }
    Turn::WaitProgress
}

/// Whether the body can be spliced from `u` to the client: both plain
/// sockets, the client's body not chunked, the worker's pipe there.
fn splices(core: &Core, env: &Env<'_, '_>, u: ConnId) -> bool {
    core.can_splice(u)
        && core.can_splice(env.client)
        && !env.cx.m.body_chunked()
        && env.worker.has_pipe(core.now())
}

/// One read of an identity body through the worker's pipe: spliced from
/// the upstream, then out to the client, neither copied into memory. What
/// the client does not take at once is read back from the pipe and queued
/// on the machine (the pipe is empty again whatever happens), bounded by
/// `want` as a read into memory would be. None: go on reading.
fn splice_body(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
    u: ConnId,
    want: usize,
) -> Option<Turn> {
    let worker = env.worker;
    let mut slot = worker.splice.borrow_mut();
    let pipe = slot.as_mut()?;
    match core.splice_in(u, pipe, want) {
        Ok(0) => {
            drop(slot);
            return Some(end_of_stream(core, env, r, p));
        }
        Ok(n) => {
            r.st.upstream.received(n as u64);
            if let Some(b) = p.reader.as_mut() {
                b.took(n);
            }
        }
        Err(e) => {
            drop(slot);
            return Some(recv_failed(core, env, r, p, u, &e, false));
        }
    }
    // A failed write leaves the bytes in the pipe: they are queued below
    // and the glue's own write then meets the client's error.
    let held = pipe.held();
    if let Ok(n) = core.splice_out(env.client, pipe, held) {
        let _ = env.cx.m.body_written_directly(n as u64);
    }
    if pipe.held() == 0 {
        return None;
    }
    // Bounded: each pass takes bytes out of the pipe or stops.
    while pipe.held() > 0 {
        match pipe.read(&mut p.rbuf) {
            Ok(n) if n > 0 => {
                let _ = env.cx.m.send_body_bytes(&p.rbuf[..n]);
            }
            _ => {
                // The body's bytes are lost with the pipe: the response
                // cannot be completed.
                *slot = None;
                drop(slot);
                log_crit(env, r, p, READING, "read() from the splice pipe failed");
                return Some(abort(core, env, r, p));
            }
        }
    }
    core.add_timer(Ev::read(u), p.conf.read_timeout);
    Some(Turn::WaitProgress)
}

/// The upstream closed: the end of a body delimited so, else a cut one.
fn end_of_stream(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let ok = p.reader.as_mut().is_some_and(|b| b.eof().is_ok());
    if ok {
        return finish(core, env, r, p);
    }
    log_line(env, r, p, ERROR, READING, PREMATURE_CLOSE);
    abort(core, env, r, p)
}

/// A recv error: EAGAIN waits (the read timeout running), others end the
/// body.
fn recv_failed(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
    u: ConnId,
    e: &io::Error,
    progress: bool,
) -> Turn {
    if e.kind() == io::ErrorKind::WouldBlock {
        core.add_timer(Ev::read(u), p.conf.read_timeout);
        return wait(progress);
    }
    let msg = format!("recv() failed ({})", sys_error_text(e));
    log_line(env, r, p, ERROR, READING, &msg);
    abort(core, env, r, p)
}

fn wait(progress: bool) -> Turn {
    if progress {
        Turn::WaitProgress
    } else {
        Turn::Wait
    }
}

/// How many upstream bytes may be read now: into memory while the
/// client's queue is under the buffers (as much as fits at once, nginx
/// reads into all its free buffers with one readv, at least one buffer);
/// else into the temp file, a write's worth while it has room; else none.
/// True with the room when it is the temp file's. `may_spill` is false
/// while the client still takes data: as nginx's event pipe writes to the
/// client before it writes to the file, full buffers first go out (the
/// glue sends them and drives the relay again), and only a client that
/// stopped reading sends the body to the temp file.
fn read_room(
    env: &Env<'_, '_>,
    p: &Proxy,
    max: usize,
    size: usize,
    may_spill: bool,
) -> (usize, bool) {
    let pending = env.cx.m.output_pending();
    let waiting = p.spill.as_ref().is_some_and(|s| s.unqueued() > 0);
    if !waiting && pending < max {
        return ((max - pending).max(size), false);
    }
    if !may_spill {
        return (0, false);
    }
    let written = p.spill.as_ref().map_or(0, |s| s.written);
    let left = p.conf.max_temp_file_size.saturating_sub(written);
    (left.min(p.conf.temp_file_write_size as u64) as usize, true)
}

/// Writes the decoded bytes in `p.out` to the temp file, making it first
/// (nginx's warning names it). The error is the log line.
fn spill(env: &mut Env<'_, '_>, r: &HttpRequest, p: &mut Proxy) -> Result<(), String> {
    if p.spill.is_none() {
        let tf = TempFile::create(&p.conf.temp_path, Keep::Unlinked, false)
            .map_err(|e| e.to_string())?;
        let (file, name) = tf.into_parts();
        let msg = format!(
            "an upstream response is buffered to a temporary file {}",
            name.display()
        );
        log_line(env, r, p, WARN, READING, &msg);
        let info = Rc::new(FileInfo {
            file,
            size: 0,
            mtime: 0,
            etag: Arc::from(""),
            last_modified: Arc::from(""),
            content: None,
        });
        let token = env.cx.open.iter().map(|(t, _)| *t).max().unwrap_or(0) + 1;
        env.cx.open.push((token, info.clone()));
        p.spill = Some(Spill {
            info,
            token,
            name,
            written: 0,
            queued: 0,
        });
    }
    let Some(s) = p.spill.as_mut() else {
        return Ok(());
    };
    temp_file::write_at(&s.info.file, &s.name, &p.out, s.written).map_err(|e| e.to_string())?;
    s.written += p.out.len() as u64;
    Ok(())
}

/// Hands the file's bytes not yet queued to the machine as one region;
/// true when there were any.
fn queue_file(env: &mut Env<'_, '_>, p: &mut Proxy) -> bool {
    let Some(s) = p.spill.as_mut().filter(|s| s.unqueued() > 0) else {
        return false;
    };
    let body = Body::File {
        token: s.token,
        offset: s.queued,
        len: s.unqueued(),
    };
    s.queued = s.written;
    let _ = env.cx.m.send_body(&body);
    true
}

/// The body is complete: the rest of the file queued, the client's
/// response ended, the connection given back to the cache when nginx
/// would. The upstream is free now, whatever the client still has to read.
pub(super) fn finish(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let now = core.now();
    queue_file(env, p);
    let _ = env.cx.m.finish_body(now);
    (r.st.body_bytes_sent, r.st.bytes_sent) = env.cx.m.last_sent();
    r.st.upstream.done(now);
    let keep = p.reader.as_ref().is_some_and(|b| b.keepalive(&p.head)) && p.buf.is_empty();
    close_upstream(core, env, p, Outcome::Ok, keep);
    Turn::End(Flow::Done)
}

/// The body cannot be completed: the client's connection closes after
/// what it got (nginx's `ngx_http_upstream_finalize_request` with an
/// error after the header was sent).
pub(super) fn abort(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let now = core.now();
    // What reached the file before the failure goes out, as nginx sends
    // what it had buffered.
    queue_file(env, p);
    let _ = env.cx.m.abort_body(now);
    (r.st.body_bytes_sent, r.st.bytes_sent) = env.cx.m.last_sent();
    r.st.upstream.done(now);
    close_upstream(core, env, p, Outcome::Failed, false);
    Turn::End(Flow::Done)
}
