//! Streamed responses on the connection machine: a head whose body
//! follows in pieces ([`Connection::respond_head`],
//! [`Connection::send_body`], [`Connection::finish_body`]), for content
//! handlers that answer across loop turns (`limit_rate` pacing, and the
//! reverse proxy's relayed bodies). Still sans-I/O: pieces are queued as
//! output like a whole response's body.

use gyre_core::event::clock::Msec;

use super::{chunked_for, Connection, NotPending, OutSeg, State};
use crate::response::{bodiless, wire_status, Body, Response};

/// How a streamed body is framed for the client
/// ([`Connection::respond_head_framed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFraming {
    Length(u64),
    Chunked,
    UntilClose,
}

/// Appends a chunk's size line (`1a2b\r\n`).
pub(super) fn chunk_size_line(out: &mut Vec<u8>, n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = HEX[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

impl Connection {
    /// Queues the head of a response whose body follows in pieces
    /// ([`Connection::send_body`], then [`Connection::finish_body`]): what
    /// an asynchronous content handler (a paced or proxied body) uses.
    /// `resp.content_length` must be set, or `resp.chunked` (a length not
    /// known: chunks to HTTP/1.1, the body ends with the connection for
    /// 1.0); `resp.body` is ignored. For HEAD (or a bodiless status) the
    /// response is complete at once and false is returned; true means the
    /// body is awaited.
    pub fn respond_head(
        &mut self,
        resp: &Response,
        now: Msec,
        date: &str,
    ) -> Result<bool, NotPending> {
        if self.state != State::Pending || self.is_streaming() {
            return Err(NotPending);
        }
        let Some(mut cur) = self.cur.take() else {
            return Err(NotPending);
        };
        let keep_alive = cur.keep_alive
            && !resp.close
            && (cur.http11 || !resp.chunked)
            && !self.body_is_bad(&cur.decoder);
        let head_only = cur.head || bodiless(resp.status);
        let total = if resp.chunked {
            u64::MAX
        } else {
            resp.content_length.unwrap_or(0)
        };
        let chunked = chunked_for(resp, cur.http11, head_only);
        let mut head = resp.clone();
        head.body = Body::Empty;
        head.content_length = Some(total);
        let (_, all) = self.queue(&head, keep_alive, true, chunked, date);
        self.last_sent = (0, all);
        cur.log.status = wire_status(resp.status);
        cur.log.bytes_sent = all;
        cur.log.end = now;
        if head_only || total == 0 {
            self.finish_request(cur, keep_alive, now);
            return Ok(false);
        }
        cur.streaming = Some(total);
        cur.chunked = chunked;
        cur.keep_alive = keep_alive;
        self.cur = Some(cur);
        Ok(true)
    }

    /// [`Connection::respond_head`] for a body whose framing the caller
    /// chooses (a proxied response): `Length(n)` announces it,
    /// `Chunked` sends `Transfer-Encoding: chunked` (an HTTP/1.1 client)
    /// and frames each piece, `UntilClose` sends no length and closes the
    /// connection after the body (an HTTP/1.0 client). Returns true when
    /// the body is awaited.
    pub fn respond_head_framed(
        &mut self,
        resp: &Response,
        framing: StreamFraming,
        now: Msec,
        date: &str,
    ) -> Result<bool, NotPending> {
        if self.state != State::Pending || self.is_streaming() {
            return Err(NotPending);
        }
        let Some(mut cur) = self.cur.take() else {
            return Err(NotPending);
        };
        let head_only = cur.head || bodiless(resp.status);
        let mut keep_alive = cur.keep_alive && !resp.close && !self.body_is_bad(&cur.decoder);
        let (cl, chunked) = match framing {
            StreamFraming::Length(n) => (Some(n), false),
            StreamFraming::Chunked => (None, !head_only),
            StreamFraming::UntilClose => {
                if !head_only {
                    keep_alive = false;
                }
                (None, false)
            }
        };
        let cl = if bodiless(resp.status) { None } else { cl };
        let start = self.out.len();
        crate::response::write_head(
            resp,
            cl,
            chunked,
            keep_alive,
            self.st.server_tokens,
            date,
            &mut self.out,
        );
        self.extend_bytes_seg(start);
        let all = (self.out.len() - start) as u64;
        self.last_sent = (0, all);
        cur.log.status = wire_status(resp.status);
        cur.log.bytes_sent = all;
        cur.log.end = now;
        if head_only || cl == Some(0) {
            self.finish_request(cur, keep_alive, now);
            return Ok(false);
        }
        cur.streaming = Some(cl.unwrap_or(u64::MAX));
        cur.chunked = chunked;
        cur.keep_alive = keep_alive;
        self.cur = Some(cur);
        Ok(true)
    }

    /// Ends a streamed body that could not be completed (the upstream
    /// failed mid-body): no chunked terminator, and the connection closes
    /// after what was queued, so the client sees a truncated response.
    pub fn abort_body(&mut self, now: Msec) -> Result<(), NotPending> {
        if !self.is_streaming() {
            return Err(NotPending);
        }
        let Some(mut cur) = self.cur.take() else {
            return Err(NotPending);
        };
        cur.streaming = None;
        cur.log.end = now;
        self.finish_request(cur, false, now);
        // Nothing more can be said on this connection: close, no linger.
        self.disposition = super::Disposition::Close;
        Ok(())
    }

    /// Body bytes and all bytes (head included) of the last response
    /// queued (`$body_bytes_sent`, `$bytes_sent`).
    pub fn last_sent(&self) -> (u64, u64) {
        self.last_sent
    }

    /// True while a streamed response awaits body bytes.
    pub fn is_streaming(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.streaming.is_some())
    }

    /// Body bytes a streamed response still announces.
    pub fn body_left(&self) -> u64 {
        self.cur.as_ref().and_then(|c| c.streaming).unwrap_or(0)
    }

    /// Queues the next piece of a streamed body (bytes or a file region),
    /// cut to what the head announced.
    pub fn send_body(&mut self, body: &Body) -> Result<(), NotPending> {
        let &Body::File { token, offset, len } = body else {
            return self.send_body_bytes(body.bytes().unwrap_or(&[]));
        };
        if !self.is_streaming() {
            return Err(NotPending);
        }
        let len = len.min(self.body_left());
        if len == 0 {
            return Ok(());
        }
        let chunked = self.cur.as_ref().is_some_and(|c| c.chunked);
        if chunked {
            self.chunk_head(len);
        }
        self.segs.push(OutSeg::File { token, offset, len });
        if chunked {
            self.push_bytes(b"\r\n");
        }
        self.body_sent(len);
        Ok(())
    }

    /// [`Connection::send_body`] for borrowed bytes (a relayed body: copied
    /// once, into the output buffer).
    pub fn send_body_bytes(&mut self, bytes: &[u8]) -> Result<(), NotPending> {
        if !self.is_streaming() {
            return Err(NotPending);
        }
        let left = self.body_left();
        let bytes = bytes
            .get(..(left.min(usize::MAX as u64) as usize).min(bytes.len()))
            .unwrap_or(&[]);
        if bytes.is_empty() {
            return Ok(());
        }
        if self.out_pos >= 16 * 1024 {
            self.compact_output();
        }
        let chunked = self.cur.as_ref().is_some_and(|c| c.chunked);
        if chunked {
            self.chunk_head(bytes.len() as u64);
        }
        self.push_bytes(bytes);
        if chunked {
            self.push_bytes(b"\r\n");
        }
        self.body_sent(bytes.len() as u64);
        Ok(())
    }

    /// Counts `n` body bytes the handler wrote to the client itself (a
    /// relayed body spliced from the upstream's socket): allowed only for
    /// an unchunked streamed body with no output queued before them, so the
    /// bytes on the wire stay in order. Cut to what the head announced;
    /// returns the bytes counted.
    pub fn body_written_directly(&mut self, n: u64) -> Result<u64, NotPending> {
        let plain = self.cur.as_ref().is_some_and(|c| !c.chunked);
        if !self.is_streaming() || !plain || self.has_output() {
            return Err(NotPending);
        }
        let n = n.min(self.body_left());
        self.body_sent(n);
        Ok(n)
    }

    /// Whether a streamed body is framed in chunks for the client.
    pub fn body_chunked(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.chunked)
    }

    /// `n` body bytes queued: what is left of the announced length and
    /// the sent counts.
    fn body_sent(&mut self, n: u64) {
        self.last_sent.0 += n;
        self.last_sent.1 += n;
        if let Some(cur) = &mut self.cur {
            if let Some(left) = cur.streaming.filter(|&l| l != u64::MAX) {
                cur.streaming = Some(left - n);
            }
            cur.log.body_bytes_sent += n;
            cur.log.bytes_sent += n;
        }
    }

    /// A chunk's size line, counted with the CRLF that ends the chunk as
    /// body bytes sent (nginx's `$body_bytes_sent` includes the framing).
    fn chunk_head(&mut self, n: u64) {
        let start = self.out.len();
        chunk_size_line(&mut self.out, n);
        let framing = (self.out.len() - start) as u64 + 2;
        self.extend_bytes_seg(start);
        self.last_sent.0 += framing;
        self.last_sent.1 += framing;
        if let Some(cur) = &mut self.cur {
            cur.log.body_bytes_sent += framing;
            cur.log.bytes_sent += framing;
        }
    }

    /// Bytes queued on the machine and not yet written (what a relaying
    /// handler bounds).
    pub fn output_pending(&self) -> usize {
        self.out.len().saturating_sub(self.out_pos)
    }

    /// Ends a streamed response. If fewer bytes were sent than announced
    /// the connection cannot be reused and closes after the output.
    pub fn finish_body(&mut self, now: Msec) -> Result<(), NotPending> {
        if !self.is_streaming() {
            return Err(NotPending);
        }
        let Some(mut cur) = self.cur.take() else {
            return Err(NotPending);
        };
        // A chunked body ends with the last chunk; one of unknown length
        // to HTTP/1.0 with the connection (keep_alive is false already).
        let keep_alive = cur.keep_alive && (cur.chunked || cur.streaming == Some(0));
        if cur.chunked {
            self.push_bytes(b"0\r\n\r\n");
            self.last_sent.0 += 5;
            self.last_sent.1 += 5;
            cur.log.body_bytes_sent += 5;
            cur.log.bytes_sent += 5;
        }
        cur.streaming = None;
        cur.chunked = false;
        cur.log.end = now;
        self.finish_request(cur, keep_alive, now);
        Ok(())
    }
}
