//! Coverage-guided fuzzing of the upstream response reader
//! (`gyre_http::upstream::http_response`): the head parser and the body
//! framing a proxied response goes through.
//!
//! Input: 1 control byte, then the bytes an upstream sends. Bit 0 picks
//! 1xx skipping, bits 1..7 the head limit (`proxy_buffer_size`, 16..=2048).
//!
//! Checked besides "no panic": a head never takes more bytes than were
//! given; a decision made on any prefix is the decision on the whole input;
//! the body after the head decodes to the same payload, done-ness and error
//! whether fed at once or byte by byte.
#![no_main]

use gyre_http::upstream::http_response::{parse_head, BodyReader, Head, HeadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    let o = HeadOptions {
        limit: 16 + usize::from(ctl >> 1) * 16,
        skip_informational: ctl & 1 == 1,
    };
    let full = parse_head(input, &o);
    for k in [input.len() / 3, input.len() / 2, input.len().saturating_sub(1)] {
        let r = parse_head(&input[..k], &o);
        if r != Head::Incomplete {
            assert_eq!(r, full, "prefix {k}");
        }
    }
    let Head::Done(head, n) = full else {
        return;
    };
    assert!(n <= input.len());
    let body = &input[n..];
    let framing = head.framing(false);
    let mut whole = BodyReader::new(framing);
    let mut a = Vec::new();
    let ra = whole.feed(body, &mut a);
    let mut split = BodyReader::new(framing);
    let mut b = Vec::new();
    let mut rb = Ok(0);
    for i in 0..body.len() {
        match split.feed(&body[i..i + 1], &mut b) {
            Ok(k) => rb = rb.map(|t| t + k),
            Err(e) => {
                rb = Err(e);
                break;
            }
        }
    }
    assert_eq!(ra.is_err(), rb.is_err());
    if ra.is_ok() {
        assert_eq!(ra, rb);
        assert_eq!(a, b);
        assert_eq!(whole.is_done(), split.is_done());
        assert!(a.len() <= body.len());
    }
});
