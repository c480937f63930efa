//! Queueing the response to the pending request (nginx's header filter
//! and `ngx_http_finalize_request`): the head and body serialized into the
//! output, `return 444`'s silent close, and the request's log record, then
//! on to [`keepalive`](super::keepalive).

use gyre_core::event::clock::Msec;

use super::{
    chunked_for, request_note, stream, Connection, Current, ErrKind, NotPending, OutSeg, State,
};
use crate::response::{bodiless, versioned_page, wire_status, write_head, Body, Response};

impl Connection {
    /// Queues the response to the pending request. `date` is the cached
    /// `Date:` header value. A HEAD request gets the head only, with the
    /// Content-Length the body would have had.
    pub fn respond(&mut self, resp: Response, now: Msec, date: &str) -> Result<(), NotPending> {
        self.respond_ref(&resp, now, date)
    }

    /// [`Connection::respond`] without taking the response (a response is
    /// a few hundred bytes: the phases hand it down by reference).
    pub fn respond_ref(
        &mut self,
        resp: &Response,
        now: Msec,
        date: &str,
    ) -> Result<(), NotPending> {
        if self.state != State::Pending || self.is_streaming() {
            return Err(NotPending);
        }
        // The request's state stays in place (it holds the log record,
        // a few hundred bytes): only its flags are copied out.
        let Some(cur) = self.cur.as_ref() else {
            return Err(NotPending);
        };
        let (cur_keep_alive, http11, head) = (cur.keep_alive, cur.http11, cur.head);
        // A body whose framing is already known to be broken cannot be
        // discarded: say so with Connection: close (nginx's special
        // response handler does the same when discarding fails).
        let bad_body = self.body_is_bad(&cur.decoder);
        if bad_body {
            // nginx discards the body before answering and says why it
            // could not (the glue names the request it still holds).
            self.notes.push(request_note(ErrKind::InvalidChunked, None));
        }
        if resp.status == 444 {
            // nginx's NGX_HTTP_CLOSE (`return 444`): no response at all,
            // the connection is closed; the access log says 444, 0 bytes.
            self.last_sent = (0, 0);
            self.finish_in_place(444, (0, 0), false, now);
            return Ok(());
        }
        let keep_alive = cur_keep_alive && !resp.close && (http11 || !resp.chunked) && !bad_body;
        let chunked = chunked_for(resp, http11, head);
        let sent = self.queue(resp, keep_alive, head, chunked, date);
        self.last_sent = sent;
        self.finish_in_place(wire_status(resp.status), sent, keep_alive, now);
        Ok(())
    }

    /// The tail of a response with `status` and `(body, all)` bytes sent:
    /// its log record, then the next request, the discarding of an unread
    /// body, or the close ([`Connection::finish_request`] with the request
    /// state left in place).
    fn finish_in_place(&mut self, status: u16, sent: (u64, u64), keep_alive: bool, now: Msec) {
        let Some(cur) = self.cur.as_mut() else {
            return;
        };
        cur.log.status = status;
        cur.log.body_bytes_sent = sent.0;
        cur.log.bytes_sent = sent.1;
        cur.log.end = now;
        if self.st.log_requests {
            self.logs.push(std::mem::take(&mut cur.log));
        }
        let done = cur.decoder.is_done();
        if !keep_alive {
            self.close_after_response(!done);
            return;
        }
        if !done {
            cur.collect = false;
            self.state = State::Discard;
            self.last_read = now;
            return;
        }
        self.cur = None;
        self.next_request();
        self.idle_since = now;
    }

    /// The tail of a response whose request state was taken out (a
    /// streamed response): its log record, then the next request, the
    /// discarding of an unread body, or the close.
    pub(super) fn finish_request(&mut self, mut cur: Current, keep_alive: bool, now: Msec) {
        if self.st.log_requests {
            self.logs.push(std::mem::take(&mut cur.log));
        }
        if !keep_alive {
            let unread = !cur.decoder.is_done();
            self.close_after_response(unread);
            return;
        }
        if !cur.decoder.is_done() {
            cur.collect = false;
            self.cur = Some(cur);
            self.state = State::Discard;
            self.last_read = now;
            return;
        }
        self.next_request();
        self.idle_since = now;
    }

    /// Convenience: answer the pending request with nginx's page for
    /// `status`.
    pub fn respond_error(&mut self, status: u16, now: Msec, date: &str) -> Result<(), NotPending> {
        self.respond(Response::error(status), now, date)
    }

    /// Serializes a response into the output; returns (body bytes, total).
    /// `chunked` (from [`chunked_for`]) writes `Transfer-Encoding: chunked`
    /// and frames the body as one chunk and the last one.
    pub(super) fn queue(
        &mut self,
        resp: &Response,
        keep_alive: bool,
        head_only: bool,
        chunked: bool,
        date: &str,
    ) -> (u64, u64) {
        let no_body = bodiless(resp.status);
        let tokens = self.st.server_tokens;
        let page = if tokens {
            versioned_page(resp.status, &resp.body)
        } else {
            None
        };
        let cl = if no_body || resp.chunked {
            None
        } else if let Some(p) = page {
            Some(p.len() as u64)
        } else {
            Some(resp.content_length.unwrap_or_else(|| resp.body.len()))
        };
        let start = self.out.len();
        write_head(resp, cl, chunked, keep_alive, tokens, date, &mut self.out);
        let head_len = (self.out.len() - start) as u64;
        if head_only || no_body {
            self.extend_bytes_seg(start);
            return (0, head_len);
        }
        if chunked {
            return self.queue_chunked_body(resp, start, head_len);
        }
        match &resp.body {
            &Body::File { token, offset, len } => {
                self.head_then_file(start, token, offset, len);
                (len, head_len + len)
            }
            body => {
                let b = page.unwrap_or_else(|| body.bytes().unwrap_or(&[]));
                self.out.extend_from_slice(b);
                self.extend_bytes_seg(start);
                (b.len() as u64, head_len + b.len() as u64)
            }
        }
    }

    /// The bytes queued since `start` as one segment, then the file
    /// region (none when it is empty).
    fn head_then_file(&mut self, start: usize, token: u64, offset: u64, len: u64) {
        self.extend_bytes_seg(start);
        if len > 0 {
            self.segs.push(OutSeg::File { token, offset, len });
        }
    }

    /// [`Connection::queue`]'s body as one chunk and the last one (kept
    /// apart: the common response does not pay for it).
    #[cold]
    fn queue_chunked_body(&mut self, resp: &Response, start: usize, head_len: u64) -> (u64, u64) {
        let framed = !resp.body.is_empty();
        if framed {
            stream::chunk_size_line(&mut self.out, resp.body.len());
        }
        let file = match &resp.body {
            &Body::File { token, offset, len } => {
                self.head_then_file(start, token, offset, len);
                len
            }
            body => {
                self.out.extend_from_slice(body.bytes().unwrap_or(&[]));
                self.extend_bytes_seg(start);
                0
            }
        };
        let t: &[u8] = if framed {
            b"\r\n0\r\n\r\n"
        } else {
            b"0\r\n\r\n"
        };
        self.push_bytes(t);
        // With a file, `out` grew by the head, the size line and the tail.
        let all = (self.out.len() - start) as u64 + file;
        (all - head_len, all)
    }
}
