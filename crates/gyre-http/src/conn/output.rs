//! The machine's output queue: heads and in-memory bodies in one byte
//! buffer, delimited into segments around file regions, written in place
//! by the glue ([`Connection::next_output`], [`Connection::consume_output`]).

use super::{Chunk, Connection, OutSeg, Output, Segment, KEEP_OUT_CAPACITY};

impl Connection {
    /// Takes the queued output (a copy; glues that write in place use
    /// [`Connection::next_output`] and [`Connection::consume_output`]).
    pub fn take_output(&mut self) -> Output {
        let mut segments = Vec::new();
        while let Some(chunk) = self.next_output() {
            let (seg, n) = match chunk {
                Chunk::Bytes(b) => (Segment::Bytes(b.to_vec()), b.len() as u64),
                Chunk::File { token, offset, len } => (Segment::File { token, offset, len }, len),
            };
            segments.push(seg);
            self.consume_output(n);
        }
        Output { segments }
    }

    /// True when output is queued.
    pub fn has_output(&self) -> bool {
        self.seg_head < self.segs.len()
    }

    /// The next piece of queued output, without copying it.
    pub fn next_output(&self) -> Option<Chunk<'_>> {
        match *self.segs.get(self.seg_head)? {
            OutSeg::Bytes { start, end } => Some(Chunk::Bytes(
                self.out.get(self.out_pos.max(start)..end).unwrap_or(&[]),
            )),
            OutSeg::File { token, offset, len } => Some(Chunk::File {
                token,
                offset: offset + self.file_off,
                len: len - self.file_off,
            }),
        }
    }

    /// True when the chunk [`Connection::next_output`] returns is followed
    /// by a file region, so the glue can tell the kernel more follows.
    pub fn file_follows(&self) -> bool {
        matches!(self.segs.get(self.seg_head + 1), Some(OutSeg::File { .. }))
    }

    /// Marks `n` bytes of the output as written (in order, across chunks).
    pub fn consume_output(&mut self, mut n: u64) {
        while let Some(seg) = self.segs.get(self.seg_head).copied() {
            match seg {
                OutSeg::Bytes { start, end } => {
                    let pos = self.out_pos.max(start);
                    let take = n.min((end - pos) as u64);
                    self.out_pos = pos + take as usize;
                    n -= take;
                    if self.out_pos < end {
                        break;
                    }
                }
                OutSeg::File { len, .. } => {
                    let take = n.min(len - self.file_off);
                    self.file_off += take;
                    n -= take;
                    if self.file_off < len {
                        break;
                    }
                    self.file_off = 0;
                }
            }
            self.seg_head += 1;
        }
        if self.seg_head == self.segs.len() {
            self.clear_output();
        }
    }

    pub(super) fn clear_output(&mut self) {
        self.out.clear();
        if self.out.capacity() > KEEP_OUT_CAPACITY {
            self.out = Vec::new();
        }
        self.segs.clear();
        self.seg_head = 0;
        self.out_pos = 0;
        self.file_off = 0;
    }

    /// Drops the written front of the byte buffer when only byte segments
    /// are left, so a long relayed body reuses the same memory instead of
    /// growing the buffer while the client reads.
    pub(super) fn compact_output(&mut self) {
        let pos = self.out_pos;
        if pos == 0
            || self.segs[self.seg_head..]
                .iter()
                .any(|s| matches!(s, OutSeg::File { .. }))
        {
            return;
        }
        self.out.drain(..pos);
        self.segs.drain(..self.seg_head);
        self.seg_head = 0;
        for s in &mut self.segs {
            if let OutSeg::Bytes { start, end } = s {
                *start = start.saturating_sub(pos);
                *end = end.saturating_sub(pos);
            }
        }
        self.out_pos = 0;
    }

    pub(super) fn push_bytes(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        let start = self.out.len();
        self.out.extend_from_slice(b);
        self.extend_bytes_seg(start);
    }

    /// Records `out[start..]` (just appended) as output.
    pub(super) fn extend_bytes_seg(&mut self, start: usize) {
        let end = self.out.len();
        if end == start {
            return;
        }
        match self.segs.last_mut() {
            Some(OutSeg::Bytes { end: e, .. }) if *e == start => *e = end,
            _ => self.segs.push(OutSeg::Bytes { start, end }),
        }
    }
}
