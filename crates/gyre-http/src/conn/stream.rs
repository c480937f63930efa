//! Streamed responses on the connection machine: a head whose body
//! follows in pieces ([`Connection::respond_head`],
//! [`Connection::send_body`], [`Connection::finish_body`]), for content
//! handlers that answer across loop turns (`limit_rate` pacing, and the
//! reverse proxy's relayed bodies). Still sans-I/O: pieces are queued as
//! output like a whole response's body.

use gyre_core::event::clock::Msec;

use super::{Connection, NotPending, OutSeg, State};
use crate::response::{bodiless, wire_status, Body, Response};

impl Connection {
    /// Queues the head of a response whose body follows in pieces
    /// ([`Connection::send_body`], then [`Connection::finish_body`]): what
    /// an asynchronous content handler (a paced or proxied body) uses.
    /// `resp.content_length` must be set; `resp.body` is ignored. For HEAD
    /// (or a bodiless status) the response is complete at once and false
    /// is returned; true means the body is awaited.
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
        let keep_alive = cur.keep_alive && !resp.close && !self.body_is_bad(&cur.decoder);
        let total = resp.content_length.unwrap_or(0);
        let head_only = cur.head || bodiless(resp.status);
        let mut head = resp.clone();
        head.body = Body::Empty;
        head.content_length = Some(total);
        let (_, all) = self.queue(&head, keep_alive, true, date);
        self.last_sent = (0, all);
        cur.log.status = wire_status(resp.status);
        cur.log.bytes_sent = all;
        cur.log.end = now;
        if head_only || total == 0 {
            self.finish_request(cur, keep_alive, now);
            return Ok(false);
        }
        cur.streaming = Some(total);
        cur.keep_alive = keep_alive;
        self.cur = Some(cur);
        Ok(true)
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
        let left = self.body_left();
        if !self.is_streaming() {
            return Err(NotPending);
        }
        let n = match body {
            Body::File { token, offset, len } => {
                let len = (*len).min(left);
                if len > 0 {
                    self.segs.push(OutSeg::File {
                        token: *token,
                        offset: *offset,
                        len,
                    });
                }
                len
            }
            b => {
                let bytes = b.bytes().unwrap_or(&[]);
                let bytes = bytes.get(..(left as usize).min(bytes.len())).unwrap_or(&[]);
                self.push_bytes(bytes);
                bytes.len() as u64
            }
        };
        self.last_sent.0 += n;
        self.last_sent.1 += n;
        if let Some(cur) = &mut self.cur {
            cur.streaming = Some(left - n);
            cur.log.body_bytes_sent += n;
            cur.log.bytes_sent += n;
        }
        Ok(())
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
        let keep_alive = cur.keep_alive && cur.streaming == Some(0);
        cur.streaming = None;
        cur.log.end = now;
        self.finish_request(cur, keep_alive, now);
        Ok(())
    }
}
