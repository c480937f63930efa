//! Coverage-guided fuzzing of the RESP/inline request parser
//! (`gyre_kv::RequestParser`) alone.
//!
//! Input: 1 control byte, then the bytes a client sends. Bits 0..1 pick the
//! limits (Redis's defaults, or tiny ones so every limit is reachable), bits
//! 2..7 the read size (1..=63 bytes, or everything at once).
//!
//! Checked besides "no panic": the parser never consumes more than it was
//! given and, fed the way `Server::feed`'s glue feeds it, holds memory
//! proportional to the bytes that arrived, never to an announced `$N` or
//! `*N`; what it leaves unconsumed stays within the query buffer limit;
//! commands are never empty and their arguments respect `proto_max_bulk_len`;
//! splitting the input differently yields the same commands (unless a size
//! limit, which depends on how much has arrived, stops one of the runs), and
//! every command survives a round trip through multibulk encoding.
#![no_main]

use gyre_kv::{Limits, Parsed, ProtocolError, RequestParser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    let limits = match ctl & 3 {
        0 => Limits::default(),
        1 => Limits {
            proto_max_bulk_len: 64,
            max_multibulk_len: 8,
            inline_max_size: 32,
            client_query_buffer_limit: 256,
        },
        // Announcements may be huge, arrival is bounded by the input.
        2 => Limits {
            inline_max_size: 64,
            ..Limits::default()
        },
        _ => Limits {
            client_query_buffer_limit: 1024,
            ..Limits::default()
        },
    };
    let read = match ctl >> 2 {
        0 => input.len().max(1),
        n => usize::from(n),
    };
    let split = feed(limits, input, read);
    let whole = feed(limits, input, input.len().max(1));
    same_commands(&split, &whole);
    for cmd in &split.commands {
        round_trip(cmd);
    }
});

/// The most the parser reserves for argument spans before they arrive.
const ARGV_RESERVE: usize = 16 * std::mem::size_of::<(usize, usize)>();

struct Outcome {
    commands: Vec<Vec<Vec<u8>>>,
    error: Option<ProtocolError>,
}

/// Feeds `input` `read` bytes at a time, keeping the unconsumed tail in a
/// buffer the way the kv glue does.
fn feed(limits: Limits, input: &[u8], read: usize) -> Outcome {
    let mut p = RequestParser::new(limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut commands = Vec::new();
    let mut arrived = 0usize;
    for chunk in input.chunks(read) {
        buf.extend_from_slice(chunk);
        arrived += chunk.len();
        loop {
            let (n, parsed) = p.parse_next(&buf);
            assert!(n <= buf.len(), "consumed {n} of {}", buf.len());
            buf.drain(..n);
            // Memory follows arrival: amortised doubling of what came in,
            // plus the parser's fixed argv reservation (at most 16 spans,
            // whatever count is announced).
            assert!(
                p.buffered_capacity() <= 2 * arrived + 64 + ARGV_RESERVE,
                "capacity {} after {arrived} bytes",
                p.buffered_capacity()
            );
            assert!(p.pending_bytes() <= arrived as u64);
            match parsed {
                Parsed::Command(args) => {
                    assert!(!args.is_empty(), "empty command");
                    for a in &args {
                        assert!(a.len() as u64 <= limits.proto_max_bulk_len.max(arrived as u64));
                    }
                    commands.push(args);
                }
                Parsed::NeedMore => {
                    assert!(
                        p.pending_bytes() + buf.len() as u64 <= limits.client_query_buffer_limit,
                        "NeedMore beyond the query buffer limit"
                    );
                    break;
                }
                Parsed::Error(e) => {
                    return Outcome {
                        commands,
                        error: Some(e),
                    };
                }
            }
        }
    }
    Outcome {
        commands,
        error: None,
    }
}

/// Errors whose timing depends on how much input has arrived.
fn size_dependent(e: &Option<ProtocolError>) -> bool {
    matches!(
        e,
        Some(
            ProtocolError::TooBigInlineRequest
                | ProtocolError::TooBigMbulkCountString
                | ProtocolError::TooBigBulkCountString
                | ProtocolError::QueryBufferLimit
        )
    )
}

fn same_commands(a: &Outcome, b: &Outcome) {
    if size_dependent(&a.error) || size_dependent(&b.error) {
        let n = a.commands.len().min(b.commands.len());
        assert_eq!(a.commands[..n], b.commands[..n]);
        if !size_dependent(&a.error) {
            assert!(a.commands.len() >= b.commands.len());
        }
        if !size_dependent(&b.error) {
            assert!(b.commands.len() >= a.commands.len());
        }
    } else {
        assert_eq!(a.commands, b.commands);
        assert_eq!(a.error, b.error);
    }
}

fn round_trip(cmd: &[Vec<u8>]) {
    let mut wire = format!("*{}\r\n", cmd.len()).into_bytes();
    for a in cmd {
        wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        wire.extend_from_slice(a);
        wire.extend_from_slice(b"\r\n");
    }
    let mut p = RequestParser::new(Limits::default());
    let (n, parsed) = p.parse_next(&wire);
    assert_eq!(n, wire.len());
    assert_eq!(parsed, Parsed::Command(cmd.to_vec()));
}
