//! Request body framing: Content-Length counting and chunked decoding.
//!
//! Owns only the framing state (a few integers), never the bytes: the caller
//! hands in whatever it has buffered, learns how much was consumed, and
//! optionally receives the decoded payload. That keeps discarding a body
//! allocation-free and lets a future proxy stream it.

/// How the body of a request is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A framing error; nginx answers 400 ("client sent invalid chunked body").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Start,
    Size,
    Ext,
    SizeLf,
    Data,
    AfterData,
    AfterDataLf,
    TrailerStart,
    TrailerLine,
    TrailerLineLf,
    FinalLf,
}

/// Incremental body decoder.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    kind: BodyKind,
    /// Bytes left in the current chunk or in the Content-Length body.
    remaining: u64,
    size: u64,
    state: Chunk,
    done: bool,
    /// Decoded payload bytes seen so far (for client_max_body_size).
    total: u64,
    /// `client_max_body_size` for a chunked body being read (0: none),
    /// checked as each chunk's size is read, as nginx does.
    limit: u64,
    /// The chunk that broke `limit`: (bytes before it, its size).
    over: Option<(u64, u64)>,
}

impl BodyDecoder {
    /// A decoder for the given framing.
    pub fn new(kind: BodyKind) -> BodyDecoder {
        let (remaining, done) = match kind {
            BodyKind::None => (0, true),
            BodyKind::Length(n) => (n, n == 0),
            BodyKind::Chunked => (0, false),
        };
        BodyDecoder {
            kind,
            remaining,
            size: 0,
            state: Chunk::Start,
            done,
            total: 0,
            limit: 0,
            over: None,
        }
    }

    /// True once the whole body (and, for chunked, the trailers) was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Payload bytes decoded so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Refuse a chunk whose size would take the body over `max` bytes
    /// (0: no limit): `decode` then fails and [`BodyDecoder::over`] says
    /// with which chunk (nginx's `client intended to send too large
    /// chunked body: 80+80 bytes`).
    pub fn set_limit(&mut self, max: u64) {
        self.limit = max;
    }

    /// (bytes before it, its size) of the chunk refused by the limit.
    pub fn over(&self) -> Option<(u64, u64)> {
        self.over
    }

    /// Consumes framing and payload from `input`, appending payload to
    /// `out` when given. Returns how many input bytes were consumed; stops
    /// at the end of the body so pipelined bytes stay with the caller.
    pub fn decode(
        &mut self,
        input: &[u8],
        mut out: Option<&mut Vec<u8>>,
    ) -> Result<usize, BodyError> {
        if self.done {
            return Ok(0);
        }
        if let BodyKind::Length(_) = self.kind {
            let n = (input.len() as u64).min(self.remaining) as usize;
            if let Some(o) = out {
                o.extend_from_slice(&input[..n]);
            }
            self.remaining -= n as u64;
            self.total += n as u64;
            self.done = self.remaining == 0;
            return Ok(n);
        }
        let mut i = 0;
        while i < input.len() && !self.done {
            let c = input[i];
            match self.state {
                Chunk::Start | Chunk::Size => {
                    if let Some(d) = (c as char).to_digit(16) {
                        // Leading zeros are fine; only the value is bounded
                        // (nginx: off_t max / 16).
                        if self.size > (i64::MAX as u64) / 16 {
                            return Err(BodyError);
                        }
                        self.size = self.size * 16 + u64::from(d);
                        self.state = Chunk::Size;
                    } else if self.state == Chunk::Start {
                        return Err(BodyError);
                    } else {
                        match c {
                            b'\r' => self.state = Chunk::SizeLf,
                            b'\n' => self.end_size_line()?,
                            b';' | b' ' | b'\t' => self.state = Chunk::Ext,
                            _ => return Err(BodyError),
                        }
                    }
                    i += 1;
                }
                Chunk::Ext => {
                    match c {
                        b'\r' => self.state = Chunk::SizeLf,
                        b'\n' => self.end_size_line()?,
                        _ => {}
                    }
                    i += 1;
                }
                Chunk::SizeLf => {
                    if c != b'\n' {
                        return Err(BodyError);
                    }
                    self.end_size_line()?;
                    i += 1;
                }
                Chunk::Data => {
                    let n = ((input.len() - i) as u64).min(self.remaining) as usize;
                    if let Some(o) = out.as_deref_mut() {
                        o.extend_from_slice(&input[i..i + n]);
                    }
                    self.remaining -= n as u64;
                    self.total += n as u64;
                    i += n;
                    if self.remaining == 0 {
                        self.state = Chunk::AfterData;
                    }
                }
                Chunk::AfterData => {
                    match c {
                        b'\r' => self.state = Chunk::AfterDataLf,
                        b'\n' => self.state = Chunk::Start,
                        _ => return Err(BodyError),
                    }
                    i += 1;
                }
                Chunk::AfterDataLf => {
                    if c != b'\n' {
                        return Err(BodyError);
                    }
                    self.state = Chunk::Start;
                    i += 1;
                }
                Chunk::TrailerStart => {
                    match c {
                        b'\r' => self.state = Chunk::FinalLf,
                        b'\n' => self.done = true,
                        _ => self.state = Chunk::TrailerLine,
                    }
                    i += 1;
                }
                Chunk::TrailerLine => {
                    match c {
                        b'\r' => self.state = Chunk::TrailerLineLf,
                        b'\n' => self.state = Chunk::TrailerStart,
                        _ => {}
                    }
                    i += 1;
                }
                Chunk::TrailerLineLf => {
                    if c != b'\n' {
                        return Err(BodyError);
                    }
                    self.state = Chunk::TrailerStart;
                    i += 1;
                }
                Chunk::FinalLf => {
                    if c != b'\n' {
                        return Err(BodyError);
                    }
                    self.done = true;
                    i += 1;
                }
            }
        }
        Ok(i)
    }

    fn end_size_line(&mut self) -> Result<(), BodyError> {
        if self.limit != 0 && self.limit.saturating_sub(self.total) < self.size {
            self.over = Some((self.total, self.size));
            return Err(BodyError);
        }
        if self.size == 0 {
            self.state = Chunk::TrailerStart;
        } else {
            self.remaining = self.size;
            self.size = 0;
            self.state = Chunk::Data;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(kind: BodyKind, input: &[u8]) -> Result<(usize, Vec<u8>, bool), BodyError> {
        let mut d = BodyDecoder::new(kind);
        let mut out = Vec::new();
        let n = d.decode(input, Some(&mut out))?;
        Ok((n, out, d.is_done()))
    }

    fn bytewise(kind: BodyKind, input: &[u8]) -> Result<(usize, Vec<u8>, bool), BodyError> {
        let mut d = BodyDecoder::new(kind);
        let mut out = Vec::new();
        let mut n = 0;
        for b in input {
            if d.is_done() {
                break;
            }
            n += d.decode(std::slice::from_ref(b), Some(&mut out))?;
        }
        Ok((n, out, d.is_done()))
    }

    #[test]
    fn chunked_cases() {
        let ok: &[(&[u8], &[u8])] = &[
            (b"3\r\nabc\r\n0\r\n\r\n", b"abc"),
            (b"3;a=b\r\nabc\r\n0\r\n\r\n", b"abc"),
            (b"3 ;x\r\nabc\r\n0\r\n\r\n", b"abc"),
            (b"00000003\r\nabc\r\n0\r\n\r\n", b"abc"),
            (
                b"A\r\n0123456789\r\n1\r\nx\r\n0\r\nTrailer: t\r\nX: y\r\n\r\n",
                b"0123456789x",
            ),
            (b"3\nabc\n0\n\n", b"abc"),
            (b"0\r\n\r\n", b""),
        ];
        for (i, o) in ok {
            for f in [all, bytewise] {
                let (n, out, done) = f(BodyKind::Chunked, i).unwrap();
                assert_eq!((n, out.as_slice(), done), (i.len(), *o, true));
            }
        }
        let bad: &[&[u8]] = &[
            b"zz\r\n",
            b"\r\n",
            b"3\r\nabcX",
            b"3\rX",
            b"-1\r\n",
            b"3x\r\n",
            b"fffffffffffffffff\r\n",
            b"0\r\n\rX",
        ];
        for i in bad {
            assert_eq!(all(BodyKind::Chunked, i), Err(BodyError), "{:?}", i);
            assert_eq!(bytewise(BodyKind::Chunked, i), Err(BodyError), "{:?}", i);
        }
    }

    #[test]
    fn stops_at_body_end() {
        let (n, out, done) = all(BodyKind::Chunked, b"1\r\na\r\n0\r\n\r\nGET /").unwrap();
        assert_eq!((n, out.as_slice(), done), (11, &b"a"[..], true));
        let (n, out, done) = all(BodyKind::Length(3), b"abcdef").unwrap();
        assert_eq!((n, out.as_slice(), done), (3, &b"abc"[..], true));
        let (n, _, done) = all(BodyKind::Length(10), b"abc").unwrap();
        assert_eq!((n, done), (3, false));
    }
}
