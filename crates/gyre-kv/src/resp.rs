//! RESP2 request parsing (multibulk and inline, incremental, pipelined) and
//! reply encoding (RESP2, and RESP3 for clients that said `HELLO 3`).
//!
//! The parser never trusts an announced size: a `$536870911` header makes it
//! expect that many bytes, but memory only grows with the bytes that really
//! arrive (amortised doubling of the argument being filled).

use crate::util::string2ll;

/// Redis's `PROTO_INLINE_MAX_SIZE`: longest inline request, and longest
/// `*N` / `$N` header line, that may sit in the buffer without a newline.
pub const PROTO_INLINE_MAX_SIZE: usize = 64 * 1024;

/// Limits the parser enforces (Redis config names in the field docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `proto-max-bulk-len` (512 MiB): largest accepted `$N`.
    pub proto_max_bulk_len: u64,
    /// Largest accepted `*N` (1024*1024; Redis 7.0 itself allows up to INT_MAX).
    pub max_multibulk_len: u64,
    /// Longest inline request / header line without a newline (64 KiB).
    pub inline_max_size: usize,
    /// `client-query-buffer-limit` (1 GiB): bytes a client may have pending
    /// (parsed-but-incomplete command plus unparsed input).
    pub client_query_buffer_limit: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            proto_max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
            inline_max_size: PROTO_INLINE_MAX_SIZE,
            client_query_buffer_limit: 1024 * 1024 * 1024,
        }
    }
}

/// A protocol violation. Every one of them closes the connection after the
/// reply (if any) is written, as Redis's `setProtocolError` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    /// `expected '$', got 'x'` with the offending byte.
    ExpectedDollar(u8),
    TooBigInlineRequest,
    TooBigMbulkCountString,
    TooBigBulkCountString,
    UnbalancedQuotes,
    /// The client exceeded `client-query-buffer-limit`: Redis closes it
    /// without a reply.
    QueryBufferLimit,
}

impl ProtocolError {
    /// The error reply text without the leading `-` and trailing CRLF, or
    /// `None` when Redis closes silently.
    pub fn message(&self) -> Option<String> {
        let m = match self {
            ProtocolError::InvalidMultibulkLength => "invalid multibulk length".to_string(),
            ProtocolError::InvalidBulkLength => "invalid bulk length".to_string(),
            ProtocolError::ExpectedDollar(b) => {
                let c = if *b == b'\r' || *b == b'\n' {
                    ' '
                } else {
                    char::from(*b)
                };
                format!("expected '$', got '{c}'")
            }
            ProtocolError::TooBigInlineRequest => "too big inline request".to_string(),
            ProtocolError::TooBigMbulkCountString => "too big mbulk count string".to_string(),
            ProtocolError::TooBigBulkCountString => "too big bulk count string".to_string(),
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request".to_string(),
            ProtocolError::QueryBufferLimit => return None,
        };
        Some(format!("ERR Protocol error: {m}"))
    }

    /// The complete reply bytes (`-ERR Protocol error: ...\r\n`), empty when
    /// the connection is closed without a reply.
    pub fn reply_bytes(&self) -> Vec<u8> {
        match self.message() {
            Some(m) => {
                let mut v = Vec::with_capacity(m.len() + 3);
                v.push(b'-');
                v.extend_from_slice(m.as_bytes());
                v.extend_from_slice(b"\r\n");
                v
            }
            None => Vec::new(),
        }
    }
}

/// One step of the parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A complete command (never empty).
    Command(Vec<Vec<u8>>),
    /// All input that can be consumed was consumed; call again with more.
    NeedMore,
    /// Protocol violation: write [`ProtocolError::reply_bytes`] and close.
    Error(ProtocolError),
}

/// A command's arguments: byte ranges of one buffer (the input, or the
/// parser's own copy for a command that arrived in pieces). Borrowed, so a
/// command costs no allocation per argument.
#[derive(Clone, Copy, Debug)]
pub struct Argv<'a> {
    buf: &'a [u8],
    spans: &'a [(usize, usize)],
}

impl<'a> Argv<'a> {
    /// Arguments `buf[s..e]` for each `(s, e)` of `spans` (in bounds).
    pub fn new(buf: &'a [u8], spans: &'a [(usize, usize)]) -> Argv<'a> {
        Argv { buf, spans }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        let &(s, e) = self.spans.get(i)?;
        self.buf.get(s..e)
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let buf = self.buf;
        self.spans.iter().map(move |&(s, e)| &buf[s..e])
    }

    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

impl std::ops::Index<usize> for Argv<'_> {
    type Output = [u8];

    fn index(&self, i: usize) -> &[u8] {
        let (s, e) = self.spans[i];
        &self.buf[s..e]
    }
}

/// Where the arguments of a parsed command are (see [`RequestParser::next`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// In the buffer given to `next`, at the spans it filled.
    Input,
    /// In the parser ([`RequestParser::argv`]); call
    /// [`RequestParser::clear_command`] once done with them.
    Parser,
}

/// One step of [`RequestParser::next`].
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Command(Source),
    NeedMore,
    Error(ProtocolError),
}

#[derive(Debug, Default)]
enum State {
    /// Between commands.
    #[default]
    Idle,
    /// Inside a multibulk: `remaining` more arguments to read.
    Multibulk { remaining: u64 },
    /// Reading a bulk payload: `need` more payload bytes then `crlf` more
    /// terminator bytes (Redis skips the two terminator bytes unchecked).
    Bulk { need: u64, crlf: u8, remaining: u64 },
}

/// Incremental RESP request parser, one per connection.
///
/// Feed it the unconsumed part of the connection's input buffer; it returns
/// how many bytes it consumed. A command that is complete in the buffer is
/// not copied: its arguments are spans of the buffer (the fast path, which
/// takes only well-formed commands and leaves anything else to the state
/// machine). Bytes of a partially received command are copied into the
/// parser (so the caller can always drop consumed bytes); only an
/// incomplete header or inline line (at most `inline_max_size`) is left
/// unconsumed.
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: Limits,
    state: State,
    /// Arguments of the command being assembled by the state machine:
    /// their bytes, back to back, and their spans in `data`.
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
    /// Bytes held by `data` (for the query buffer limit).
    pending: u64,
}

fn find(buf: &[u8], b: u8) -> Option<usize> {
    buf.iter().position(|&x| x == b)
}

/// A `*N` / `$N` header's number as the fast path takes it: 1 to 18
/// digits, no leading zero (but `0` itself), then `\r` and one more byte
/// (the state machine skips it unchecked as well). Anything else is left to
/// the state machine. Returns the number and the offset past the header.
fn header_num(buf: &[u8], mut i: usize) -> Option<(u64, usize)> {
    let first = i;
    let mut n = 0u64;
    loop {
        let b = *buf.get(i)?;
        if b == b'\r' {
            break;
        }
        if !b.is_ascii_digit() || i - first == 18 || (i > first && n == 0) {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
        i += 1;
    }
    if i == first || i + 1 >= buf.len() {
        return None;
    }
    Some((n, i + 2))
}

/// Inline separators of an unquoted word ([`split_args`]).
fn is_word_sep(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

impl RequestParser {
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            ..Default::default()
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Bytes of an incomplete command held inside the parser.
    pub fn pending_bytes(&self) -> u64 {
        self.pending
    }

    /// Capacity held by the parser's buffers (tests check that announced
    /// sizes are not allocated up front).
    pub fn buffered_capacity(&self) -> usize {
        self.data.capacity() + self.spans.capacity() * std::mem::size_of::<(usize, usize)>()
    }

    /// True when no command is partially parsed.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Idle)
    }

    /// Parse at most one command from `buf`. Returns the bytes consumed and
    /// the outcome. After `Parsed::Error` the parser must not be used again.
    pub fn parse_next(&mut self, buf: &[u8]) -> (usize, Parsed) {
        let mut spans = Vec::new();
        let (n, step) = self.next(buf, &mut spans);
        let parsed = match step {
            Step::Command(Source::Input) => Parsed::Command(Argv::new(buf, &spans).to_vecs()),
            Step::Command(Source::Parser) => {
                let args = self.argv().to_vecs();
                self.clear_command();
                Parsed::Command(args)
            }
            Step::NeedMore => Parsed::NeedMore,
            Step::Error(e) => Parsed::Error(e),
        };
        (n, parsed)
    }

    /// Parse at most one command from `buf` without copying it when it is
    /// all there: [`Step::Command`] with [`Source::Input`] means its
    /// arguments are `Argv::new(buf, spans)`; with [`Source::Parser`] they
    /// are [`RequestParser::argv`] (call [`RequestParser::clear_command`]
    /// after use). Returns the bytes consumed too. After `Step::Error` the
    /// parser must not be used again.
    pub fn next(&mut self, buf: &[u8], spans: &mut Vec<(usize, usize)>) -> (usize, Step) {
        if self.is_idle() {
            let fast = match buf.first() {
                Some(b'*') => self.complete_multibulk(buf, spans),
                Some(_) => complete_inline(buf, spans),
                None => None,
            };
            if let Some(n) = fast {
                return (n, Step::Command(Source::Input));
            }
        }
        self.assemble(buf)
    }

    /// The arguments of the command [`Source::Parser`] refers to.
    pub fn argv(&self) -> Argv<'_> {
        Argv::new(&self.data, &self.spans)
    }

    /// Forget the assembled command; its buffers go too, so an idle client
    /// holds none.
    pub fn clear_command(&mut self) {
        self.data = Vec::new();
        self.spans = Vec::new();
        self.pending = 0;
    }

    /// The fast path: a well-formed multibulk command wholly in `buf` (the
    /// common case: a client writes whole commands), as spans of `buf`.
    /// `None` (nothing consumed) for anything else, which the state machine
    /// then parses or rejects with Redis's exact errors.
    fn complete_multibulk(&self, buf: &[u8], spans: &mut Vec<(usize, usize)>) -> Option<usize> {
        let (argc, mut p) = header_num(buf, 1)?;
        if argc == 0 || argc > self.limits.max_multibulk_len {
            return None;
        }
        spans.clear();
        let mut total = 0u64;
        for _ in 0..argc {
            if buf.get(p) != Some(&b'$') {
                return None;
            }
            let (len, start) = header_num(buf, p + 1)?;
            if len > self.limits.proto_max_bulk_len {
                return None;
            }
            let end = start.checked_add(usize::try_from(len).ok()?)?;
            // Payload and the two (unchecked) terminator bytes.
            if end.checked_add(2)? > buf.len() {
                return None;
            }
            spans.push((start, end));
            total += len;
            p = end + 2;
        }
        (total <= self.limits.client_query_buffer_limit).then_some(p)
    }

    /// The state machine: any input, in any pieces. Copies the arguments
    /// into the parser.
    fn assemble(&mut self, buf: &[u8]) -> (usize, Step) {
        let mut pos = 0usize;
        loop {
            let rest = &buf[pos..];
            match self.state {
                State::Idle => {
                    if rest.is_empty() {
                        return (pos, Step::NeedMore);
                    }
                    if rest[0] == b'*' {
                        let Some(cr) = find(rest, b'\r') else {
                            if rest.len() > self.limits.inline_max_size {
                                return (pos, Step::Error(ProtocolError::TooBigMbulkCountString));
                            }
                            return (pos, self.need_more(rest.len()));
                        };
                        if cr + 1 >= rest.len() {
                            return (pos, self.need_more(rest.len()));
                        }
                        let n = match string2ll(&rest[1..cr]) {
                            Some(n) if n <= 0 => {
                                // `*0` / `*-1`: an empty request, skipped.
                                pos += cr + 2;
                                continue;
                            }
                            Some(n) if (n as u64) <= self.limits.max_multibulk_len => n as u64,
                            _ => return (pos, Step::Error(ProtocolError::InvalidMultibulkLength)),
                        };
                        pos += cr + 2;
                        self.state = State::Multibulk { remaining: n };
                    } else {
                        let Some(nl) = find(rest, b'\n') else {
                            if rest.len() > self.limits.inline_max_size {
                                return (pos, Step::Error(ProtocolError::TooBigInlineRequest));
                            }
                            return (pos, self.need_more(rest.len()));
                        };
                        let mut line = &rest[..nl];
                        if let Some(stripped) = line.strip_suffix(b"\r") {
                            line = stripped;
                        }
                        pos += nl + 1;
                        match split_args(line) {
                            None => return (pos, Step::Error(ProtocolError::UnbalancedQuotes)),
                            Some(args) if args.is_empty() => continue,
                            Some(args) => {
                                for a in args {
                                    let s = self.data.len();
                                    self.data.extend_from_slice(&a);
                                    self.spans.push((s, self.data.len()));
                                }
                                return (pos, Step::Command(Source::Parser));
                            }
                        }
                    }
                }
                State::Multibulk { remaining } => {
                    if remaining == 0 {
                        self.state = State::Idle;
                        return (pos, Step::Command(Source::Parser));
                    }
                    if rest.is_empty() {
                        return (pos, self.need_more(0));
                    }
                    let Some(cr) = find(rest, b'\r') else {
                        if rest.len() > self.limits.inline_max_size {
                            return (pos, Step::Error(ProtocolError::TooBigBulkCountString));
                        }
                        return (pos, self.need_more(rest.len()));
                    };
                    if cr + 1 >= rest.len() {
                        return (pos, self.need_more(rest.len()));
                    }
                    if rest[0] != b'$' {
                        return (pos, Step::Error(ProtocolError::ExpectedDollar(rest[0])));
                    }
                    let len = match string2ll(&rest[1..cr]) {
                        Some(n) if n >= 0 && (n as u64) <= self.limits.proto_max_bulk_len => {
                            n as u64
                        }
                        _ => return (pos, Step::Error(ProtocolError::InvalidBulkLength)),
                    };
                    pos += cr + 2;
                    if self.spans.capacity() == 0 {
                        // Reserve for the announced count, but never much.
                        let want = usize::try_from(remaining).unwrap_or(usize::MAX).min(16);
                        self.spans.reserve(want);
                    }
                    // The argument's span starts empty and grows with its bytes.
                    self.spans.push((self.data.len(), self.data.len()));
                    self.state = State::Bulk {
                        need: len,
                        crlf: 2,
                        remaining: remaining - 1,
                    };
                }
                State::Bulk {
                    need,
                    crlf,
                    remaining,
                } => {
                    if need > 0 {
                        if rest.is_empty() {
                            return (pos, self.need_more(0));
                        }
                        let take = usize::try_from(need).unwrap_or(usize::MAX).min(rest.len());
                        self.data.extend_from_slice(&rest[..take]);
                        if let Some(last) = self.spans.last_mut() {
                            last.1 = self.data.len();
                        }
                        self.pending += take as u64;
                        pos += take;
                        self.state = State::Bulk {
                            need: need - take as u64,
                            crlf,
                            remaining,
                        };
                        if self.pending > self.limits.client_query_buffer_limit {
                            return (pos, Step::Error(ProtocolError::QueryBufferLimit));
                        }
                        continue;
                    }
                    if crlf > 0 {
                        if rest.is_empty() {
                            return (pos, self.need_more(0));
                        }
                        let take = usize::from(crlf).min(rest.len());
                        pos += take;
                        self.state = State::Bulk {
                            need: 0,
                            crlf: crlf - take as u8,
                            remaining,
                        };
                        continue;
                    }
                    self.state = State::Multibulk { remaining };
                }
            }
        }
    }

    fn need_more(&self, unconsumed: usize) -> Step {
        if self.pending.saturating_add(unconsumed as u64) > self.limits.client_query_buffer_limit {
            Step::Error(ProtocolError::QueryBufferLimit)
        } else {
            Step::NeedMore
        }
    }

    /// Parse as many complete commands as `buf` holds into `out`. Returns the
    /// bytes consumed and the protocol error that stopped parsing, if any
    /// (commands before the error are still in `out` and must be executed
    /// before the error reply is written).
    pub fn parse_all(
        &mut self,
        buf: &[u8],
        out: &mut Vec<Vec<Vec<u8>>>,
    ) -> (usize, Option<ProtocolError>) {
        let mut pos = 0;
        loop {
            let (n, p) = self.parse_next(&buf[pos..]);
            pos += n;
            match p {
                Parsed::Command(c) => out.push(c),
                Parsed::NeedMore => return (pos, None),
                Parsed::Error(e) => return (pos, Some(e)),
            }
        }
    }
}

/// The fast path of an inline command: a whole line with no quotes and
/// none of the bytes [`split_args`] treats specially (NUL, `\v`, `\f`), so
/// its words are plain runs between separators. `None` for anything else,
/// and for an empty line (the state machine skips it).
fn complete_inline(buf: &[u8], spans: &mut Vec<(usize, usize)>) -> Option<usize> {
    let nl = find(buf, b'\n')?;
    let line = &buf[..nl];
    if line
        .iter()
        .any(|&b| matches!(b, b'"' | b'\'' | 0 | 0x0b | 0x0c))
    {
        return None;
    }
    spans.clear();
    let mut i = 0;
    while i < line.len() {
        if is_word_sep(line[i]) {
            i += 1;
            continue;
        }
        let s = i;
        while i < line.len() && !is_word_sep(line[i]) {
            i += 1;
        }
        spans.push((s, i));
    }
    (!spans.is_empty()).then_some(nl + 1)
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Split an inline request line like Redis's `sdssplitargs`: whitespace
/// separated words, `"..."` with `\n \r \t \b \a \\ \" \xHH` escapes, `'...'`
/// with `\'`; a closing quote must be followed by whitespace or the end.
/// `None` on unbalanced quotes. As in Redis (which works on a C string) a NUL
/// byte ends the line.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match find(line, 0) {
        Some(n) => &line[..n],
        None => line,
    };
    let at = |i: usize| line.get(i).copied();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while at(i).is_some_and(is_space) {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = at(i);
            if inq {
                match c {
                    None => return None,
                    Some(b'\\') => {
                        let hex = match (
                            at(i + 1),
                            at(i + 2).and_then(hex_val),
                            at(i + 3).and_then(hex_val),
                        ) {
                            (Some(b'x'), Some(h), Some(l)) => Some(h * 16 + l),
                            _ => None,
                        };
                        if let Some(v) = hex {
                            cur.push(v);
                            i += 4;
                        } else if let Some(n) = at(i + 1) {
                            cur.push(match n {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 0x08,
                                b'a' => 0x07,
                                other => other,
                            });
                            i += 2;
                        } else {
                            // A lone trailing backslash: kept, then the
                            // quote is unterminated.
                            cur.push(b'\\');
                            i += 1;
                        }
                    }
                    Some(b'"') => {
                        if at(i + 1).is_some_and(|n| !is_space(n)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        cur.push(other);
                        i += 1;
                    }
                }
            } else if insq {
                match c {
                    None => return None,
                    Some(b'\\') if at(i + 1) == Some(b'\'') => {
                        cur.push(b'\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        if at(i + 1).is_some_and(|n| !is_space(n)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        cur.push(other);
                        i += 1;
                    }
                }
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t') => break,
                    Some(b'"') => {
                        inq = true;
                        i += 1;
                    }
                    Some(b'\'') => {
                        insq = true;
                        i += 1;
                    }
                    Some(other) => {
                        cur.push(other);
                        i += 1;
                    }
                }
            }
        }
        args.push(cur);
    }
}

// ---------------------------------------------------------------------------
// Reply encoding
// ---------------------------------------------------------------------------

/// Protocol version negotiated with `HELLO` (2 or 3).
pub type Proto = u8;

fn push_num(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(crate::util::decimal(n, &mut buf));
}

fn header(out: &mut Vec<u8>, t: u8, n: i64) {
    // One- and two-digit numbers (most bulk and array lengths) as one
    // fixed-size append.
    if (0..10).contains(&n) {
        out.extend_from_slice(&[t, b'0' + n as u8, b'\r', b'\n']);
        return;
    }
    if (10..100).contains(&n) {
        let (tens, ones) = (n / 10, n % 10);
        out.extend_from_slice(&[t, b'0' + tens as u8, b'0' + ones as u8, b'\r', b'\n']);
        return;
    }
    out.push(t);
    push_num(out, n);
    out.extend_from_slice(b"\r\n");
}

/// `+s\r\n` (CR and LF in `s` become spaces).
pub fn write_simple(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'+');
    out.extend(
        s.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// `-msg\r\n`; `msg` carries its code (`ERR ...`, `NOPROTO ...`). CR and LF
/// become spaces as in Redis's `addReplyErrorLength`.
pub fn write_error(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    out.extend(
        msg.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

pub fn write_int(out: &mut Vec<u8>, n: i64) {
    header(out, b':', n);
}

pub fn write_bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Null bulk (`$-1`) in RESP2, null (`_`) in RESP3.
pub fn write_null(out: &mut Vec<u8>, proto: Proto) {
    if proto >= 3 {
        out.extend_from_slice(b"_\r\n");
    } else {
        out.extend_from_slice(b"$-1\r\n");
    }
}

/// Null array (`*-1`) in RESP2, null (`_`) in RESP3.
pub fn write_null_array(out: &mut Vec<u8>, proto: Proto) {
    if proto >= 3 {
        out.extend_from_slice(b"_\r\n");
    } else {
        out.extend_from_slice(b"*-1\r\n");
    }
}

pub fn write_array_len(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', n as i64);
}

/// A map of `n` pairs: `%n` in RESP3, a flat array of `2n` in RESP2.
pub fn write_map_len(out: &mut Vec<u8>, n: usize, proto: Proto) {
    if proto >= 3 {
        header(out, b'%', n as i64);
    } else {
        header(out, b'*', 2 * n as i64);
    }
}

/// A set of `n` elements: `~n` in RESP3, an array in RESP2.
pub fn write_set_len(out: &mut Vec<u8>, n: usize, proto: Proto) {
    header(out, if proto >= 3 { b'~' } else { b'*' }, n as i64);
}

/// Boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
pub fn write_bool(out: &mut Vec<u8>, v: bool, proto: Proto) {
    if proto >= 3 {
        out.extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" });
    } else {
        write_int(out, i64::from(v));
    }
}

/// Verbatim text (`=len\r\ntxt:...`) in RESP3, a bulk string in RESP2.
pub fn write_verbatim(out: &mut Vec<u8>, text: &[u8], proto: Proto) {
    if proto >= 3 {
        header(out, b'=', text.len() as i64 + 4);
        out.extend_from_slice(b"txt:");
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    } else {
        write_bulk(out, text);
    }
}

/// An owned reply value, for callers that build replies before encoding
/// them, and for tests (see [`decode_reply`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1` (RESP2) / `_` (RESP3).
    Null,
    /// `*-1` (RESP2) / `_` (RESP3).
    NullArray,
    Array(Vec<Reply>),
    /// RESP3 map (a flat array in RESP2).
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set (an array in RESP2).
    Set(Vec<Reply>),
    Bool(bool),
    /// RESP3 double, already formatted (`,1.5`); a bulk string in RESP2.
    Double(Vec<u8>),
    /// RESP3 verbatim string (a bulk in RESP2); format prefix stripped.
    Verbatim(Vec<u8>),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple(b"OK".to_vec())
    }

    pub fn error(msg: &str) -> Reply {
        Reply::Error(msg.as_bytes().to_vec())
    }

    pub fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(b.to_vec())
    }

    /// Append this reply in protocol `proto` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>, proto: Proto) {
        match self {
            Reply::Simple(s) => write_simple(out, s),
            Reply::Error(e) => write_error(out, e),
            Reply::Int(n) => write_int(out, *n),
            Reply::Bulk(b) => write_bulk(out, b),
            Reply::Null => write_null(out, proto),
            Reply::NullArray => write_null_array(out, proto),
            Reply::Array(items) => {
                write_array_len(out, items.len());
                items.iter().for_each(|i| i.encode(out, proto));
            }
            Reply::Map(pairs) => {
                write_map_len(out, pairs.len(), proto);
                for (k, v) in pairs {
                    k.encode(out, proto);
                    v.encode(out, proto);
                }
            }
            Reply::Set(items) => {
                write_set_len(out, items.len(), proto);
                items.iter().for_each(|i| i.encode(out, proto));
            }
            Reply::Bool(b) => write_bool(out, *b, proto),
            Reply::Double(d) => {
                if proto >= 3 {
                    out.push(b',');
                    out.extend_from_slice(d);
                    out.extend_from_slice(b"\r\n");
                } else {
                    write_bulk(out, d);
                }
            }
            Reply::Verbatim(t) => write_verbatim(out, t, proto),
        }
    }

    /// Encode into a fresh buffer.
    pub fn to_bytes(&self, proto: Proto) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v, proto);
        v
    }
}

/// Decode one reply (RESP2 or RESP3) from `buf`: `Some((reply, bytes))`, or
/// `None` if `buf` does not hold a complete, well-formed reply. Meant for
/// tests and tools; nesting is limited to 64 levels.
pub fn decode_reply(buf: &[u8]) -> Option<(Reply, usize)> {
    decode_at(buf, 0)
}

fn decode_at(buf: &[u8], depth: u32) -> Option<(Reply, usize)> {
    if depth > 64 {
        return None;
    }
    let t = *buf.first()?;
    let cr = find(buf, b'\r')?;
    if buf.get(cr + 1) != Some(&b'\n') {
        return None;
    }
    let line = &buf[1..cr];
    let mut pos = cr + 2;
    let num = || string2ll(line);
    let reply = match t {
        b'+' => Reply::Simple(line.to_vec()),
        b'-' => Reply::Error(line.to_vec()),
        b':' => Reply::Int(num()?),
        b'#' => Reply::Bool(line == b"t"),
        b',' => Reply::Double(line.to_vec()),
        b'_' => Reply::Null,
        b'$' | b'=' => {
            let n = num()?;
            if n < 0 {
                return Some((Reply::Null, pos));
            }
            let n = usize::try_from(n).ok()?;
            let body = buf.get(pos..pos.checked_add(n)?)?;
            if buf.get(pos + n..pos + n + 2)? != b"\r\n" {
                return None;
            }
            pos += n + 2;
            if t == b'=' {
                Reply::Verbatim(body.get(4..)?.to_vec())
            } else {
                Reply::Bulk(body.to_vec())
            }
        }
        b'*' | b'~' | b'%' => {
            let n = num()?;
            if n < 0 {
                return Some((Reply::NullArray, pos));
            }
            let count = if t == b'%' { n.checked_mul(2)? } else { n };
            let mut items = Vec::new();
            for _ in 0..count {
                let (r, used) = decode_at(&buf[pos..], depth + 1)?;
                items.push(r);
                pos += used;
            }
            match t {
                b'*' => Reply::Array(items),
                b'~' => Reply::Set(items),
                _ => {
                    let mut pairs = Vec::new();
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Reply::Map(pairs)
                }
            }
        }
        _ => return None,
    };
    Some((reply, pos))
}

#[cfg(test)]
mod tests;
