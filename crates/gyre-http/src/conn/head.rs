//! Reading a request head out of the input (nginx's
//! `ngx_http_process_request_line` and `ngx_http_process_request_headers`):
//! a complete head becomes [`Event::Request`] with its request state and
//! log record; an incomplete one waits (or ends with the client's close),
//! a refused one is answered with nginx's error page.

use gyre_core::event::clock::Msec;

use super::{
    err_note, request_note, Connection, Current, Disposition, ErrKind, Event, LogRecord, State,
};
use crate::body::BodyDecoder;
use crate::parse::HeadStatus;
use crate::response::{wire_status, Response};

impl Connection {
    pub(super) fn poll_head(&mut self, now: Msec, date: &str) -> Option<Event> {
        let mut req = self.spare.take().unwrap_or_default();
        let end = match self.head.advance(&self.inbuf, &self.st, &mut req) {
            HeadStatus::Complete(end) => end,
            other => {
                self.spare = Some(req);
                self.head_not_complete(other, now, date);
                return None;
            }
        };
        self.note_ignored();
        if end == self.inbuf.len() {
            // The usual case: nothing pipelined behind the head.
            self.inbuf.clear();
        } else {
            self.inbuf.drain(..end);
        }
        self.head.reset(&self.st);
        self.requests += 1;
        self.ended = None;
        let st = &self.st;
        if st.keepalive_timeout == 0
            || self.requests >= st.keepalive_requests
            || now.wrapping_sub(self.created) > st.keepalive_time
        {
            req.keep_alive = false;
        }
        // nginx's static handler discards the body of a GET or HEAD
        // before answering, so a framing error already buffered with the
        // head earns a 400 instead of the page (other methods get their
        // 405 first; `respond` then closes).
        if req.is_get_or_head() && self.body_is_bad(&BodyDecoder::new(req.body)) {
            self.notes
                .push(request_note(ErrKind::InvalidChunked, Some(&req)));
            let mut rec = self.bare_log(400, now);
            rec.request_line = req.request_line().to_vec();
            let (body, all) = self.queue(&Response::error(400), false, req.is_head(), false, date);
            rec.body_bytes_sent = body;
            rec.bytes_sent = all;
            self.logs.push(rec);
            self.close_after_response(false);
            self.spare = Some(req);
            return None;
        }
        let expect_continue = req.version >= crate::Version::HTTP_11
            && req
                .header("Expect")
                .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));
        self.cur = Some(Current {
            keep_alive: req.keep_alive,
            head: req.is_head(),
            decoder: BodyDecoder::new(req.body),
            collect: false,
            body_end_sent: false,
            expect_continue,
            streaming: None,
            http11: req.version >= crate::Version::HTTP_11,
            chunked: false,
            log: if self.st.log_requests {
                LogRecord {
                    request_line: req.request_line().to_vec(),
                    status: 0,
                    body_bytes_sent: 0,
                    bytes_sent: 0,
                    referer: req.referer(),
                    user_agent: req.user_agent(),
                    host: req.host().map(str::to_string),
                    remote_user: crate::auth_basic::basic_user(&req).map(|(cred, n)| {
                        String::from_utf8_lossy(cred.get(..n).unwrap_or(&[])).into_owned()
                    }),
                    start: self.head_start,
                    end: now,
                    sink: 0,
                    peer: None,
                }
            } else {
                LogRecord::default()
            },
        });
        self.state = State::Pending;
        self.last_read = now;
        Some(Event::Request(req))
    }

    /// An incomplete head (waiting, or the client left) or a refused one.
    fn head_not_complete(&mut self, status: HeadStatus, now: Msec, date: &str) {
        match status {
            HeadStatus::Incomplete => {
                if self.eof {
                    // nginx: "client prematurely closed connection", 400
                    // in the log, nothing sent.
                    if self.head.started() {
                        let kind = if self.head.line_parsed() {
                            ErrKind::ClosedHeaders
                        } else {
                            ErrKind::ClosedLine
                        };
                        self.note_head(err_note::note(kind, &self.head, &self.inbuf));
                        let rec = self.bare_log(400, now);
                        self.logs.push(rec);
                    }
                    self.close(Disposition::Close);
                }
            }
            HeadStatus::Error(status) => {
                if !self.head.line_parsed() && matches!(status, 400 | 505) {
                    let kind = err_note::line_error(self.head.line_so_far(&self.inbuf), status);
                    self.note_head(err_note::note(kind, &self.head, &self.inbuf));
                } else if let Some(n) = err_note::head_note(&self.head, &self.inbuf) {
                    self.note_head(n);
                } else {
                    self.note_ignored();
                }
                // A body announced with the refused head is still coming
                // (nginx sets lingering for 413); other leftovers are
                // whatever was pipelined behind the error.
                let pending_input = status == 413 && self.head.body_may_follow();
                let mut rec = self.bare_log(status, now);
                let resp = Response::error(status);
                let (body, all) = self.queue(&resp, false, false, false, date);
                rec.status = wire_status(status);
                rec.body_bytes_sent = body;
                rec.bytes_sent = all;
                self.logs.push(rec);
                self.close_after_response(pending_input);
            }
            HeadStatus::Complete(_) => {}
        }
    }
}
