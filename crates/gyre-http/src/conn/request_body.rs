//! The machine's side of a request body (nginx's
//! `ngx_http_request_body.c`): decoding it for a handler that collects it
//! (with `100 Continue` and `client_max_body_size`), discarding it after
//! the response, and the error-log notes about it. Storing a collected
//! body is [`crate::request_body`]'s.

use gyre_core::event::clock::Msec;

use super::{request_note, Connection, Disposition, ErrKind, ErrNote, Event, State};
use crate::body::BodyDecoder;
use crate::parse::Request;
use crate::response::Response;

impl Connection {
    /// A note about the body of the current request (nginx names the
    /// request, without an action): its line and headers come from the
    /// request kept while discarding; while a module reads the body the
    /// glue has the request and names it itself.
    pub(super) fn body_note(&self, kind: ErrKind) -> ErrNote {
        request_note(kind, self.discarded.as_deref())
    }

    /// Takes the answered request while its body is still being discarded
    /// or the connection lingers (the glue's request object goes back to
    /// its pool): nginx's lines about the rest of the input name it. `req` gets the spare request in
    /// exchange, so nothing is allocated once the machine has one.
    pub fn keep_discarded(&mut self, req: &mut Box<Request>) {
        let reading_on = self.state == State::Discard || self.disposition == Disposition::Linger;
        if !reading_on || self.discarded.is_some() {
            return;
        }
        let other = self.spare.take().unwrap_or_default();
        self.discarded = Some(std::mem::replace(req, other));
    }

    /// Switches the current request to collecting its body: following
    /// [`Connection::poll`] calls yield `Body`/`BodyEnd`. Sends
    /// `100 Continue` when the client asked for it. Only meaningful before
    /// [`Connection::respond`].
    pub fn collect_body(&mut self) {
        if self.state != State::Pending {
            return;
        }
        let Some(cur) = &mut self.cur else {
            return;
        };
        let send_continue = !cur.collect && cur.expect_continue && !cur.decoder.is_done();
        cur.collect = true;
        // nginx checks a chunked body's size against client_max_body_size
        // chunk by chunk while reading it (not while discarding it).
        cur.decoder.set_limit(self.st.client_max_body_size);
        if send_continue {
            self.push_bytes(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
    }

    pub(super) fn poll_pending(&mut self, now: Msec, date: &str) -> Option<Event> {
        let max = self.st.client_max_body_size;
        let cur = self.cur.as_mut()?;
        if !cur.collect {
            return None;
        }
        if cur.decoder.is_done() {
            if cur.body_end_sent {
                return None;
            }
            cur.body_end_sent = true;
            return Some(Event::BodyEnd);
        }
        let mut data = Vec::new();
        let res = cur.decoder.decode(&self.inbuf, Some(&mut data));
        let status = match res {
            Ok(n) => {
                self.inbuf.drain(..n);
                if max != 0 && cur.decoder.total() > max {
                    413
                } else if !data.is_empty() {
                    return Some(Event::Body(data));
                } else if cur.decoder.is_done() {
                    cur.body_end_sent = true;
                    return Some(Event::BodyEnd);
                } else {
                    if self.eof {
                        // Client went away mid-body: nginx logs 400 and
                        // says so (the glue names the request).
                        self.notes.push(request_note(ErrKind::BodyClosed, None));
                        self.ended = Some(400);
                        if let Some(cur) = self.cur.take() {
                            let mut log = cur.log;
                            log.status = 400;
                            log.end = now;
                            self.logs.push(log);
                        }
                        self.close(Disposition::Close);
                    }
                    return None;
                }
            }
            Err(_) => match cur.decoder.over() {
                Some((before, size)) => {
                    let mut n = request_note(ErrKind::TooLargeChunked, None);
                    n.detail = Some(format!(
                        "client intended to send too large chunked body: {before}+{size} bytes"
                    ));
                    self.notes.push(n);
                    413
                }
                None => {
                    self.notes.push(request_note(ErrKind::InvalidChunked, None));
                    400
                }
            },
        };
        let mut resp = Response::error(status);
        resp.close = true;
        let head = cur.head;
        let mut log = cur.log.clone();
        let (body, all) = self.queue(&resp, false, head, false, date);
        log.status = status;
        log.body_bytes_sent = body;
        log.bytes_sent = all;
        log.end = now;
        self.logs.push(log);
        self.cur = None;
        self.close_after_response(status == 413);
        Some(Event::BodyError(status))
    }

    /// Discards body bytes after the response; true when the body is done
    /// and the next request may be parsed.
    pub(super) fn poll_discard(&mut self, _now: Msec) -> bool {
        let Some(cur) = self.cur.as_mut() else {
            self.state = State::Idle;
            return true;
        };
        match cur.decoder.decode(&self.inbuf, None) {
            Ok(n) => {
                self.inbuf.drain(..n);
            }
            Err(_) => {
                // The response is already out; nginx logs the body's
                // error and closes.
                let n = self.body_note(ErrKind::InvalidChunked);
                self.notes.push(n);
                self.cur = None;
                self.close(Disposition::Close);
                return false;
            }
        }
        if cur.decoder.is_done() {
            self.cur = None;
            self.next_request();
            return true;
        }
        if self.eof {
            self.cur = None;
            self.close(Disposition::Close);
        }
        false
    }

    /// True when the buffered bytes already break the rest of the body
    /// `decoder` expects (checked on a copy, consuming nothing).
    pub(super) fn body_is_bad(&self, decoder: &BodyDecoder) -> bool {
        !decoder.is_done() && decoder.clone().decode(&self.inbuf, None).is_err()
    }
}
