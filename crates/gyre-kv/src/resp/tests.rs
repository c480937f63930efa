use super::*;
use crate::util::Rng;

/// Every header (short numbers take a fixed-size path) reads as the
/// number's decimal text.
#[test]
fn headers_are_decimal() {
    for n in (-1200..1200).chain([i64::MIN, i64::MAX, 123_456_789]) {
        let mut out = Vec::new();
        write_int(&mut out, n);
        assert_eq!(out, format!(":{n}\r\n").into_bytes(), "{n}");
    }
}

/// Bytes consumed so far and the command (or why parsing stopped).
type Outcome = (usize, Result<Vec<Vec<u8>>, String>);

/// Every command of `buf` through `next` (fast path first) or through
/// the state machine alone.
fn steps(buf: &[u8], fast: bool, limits: Limits) -> Vec<Outcome> {
    let mut p = RequestParser::new(limits);
    let mut spans = Vec::new();
    let mut pos = 0;
    let mut v = Vec::new();
    loop {
        let rest = &buf[pos..];
        let (n, step) = if fast {
            p.next(rest, &mut spans)
        } else {
            p.assemble(rest)
        };
        pos += n;
        let r = match step {
            Step::Command(Source::Input) => Ok(Argv::new(rest, &spans).to_vecs()),
            Step::Command(Source::Parser) => {
                let a = p.argv().to_vecs();
                p.clear_command();
                Ok(a)
            }
            Step::NeedMore => Err("more".to_string()),
            Step::Error(e) => Err(format!("{e:?}")),
        };
        let stop = r.is_err();
        v.push((pos, r));
        if stop {
            return v;
        }
    }
}

fn same(buf: &[u8], limits: Limits) {
    assert_eq!(
        steps(buf, true, limits),
        steps(buf, false, limits),
        "{:?}",
        String::from_utf8_lossy(buf)
    );
}

#[test]
fn fast_path_parses_like_the_state_machine() {
    let small = Limits {
        proto_max_bulk_len: 10,
        max_multibulk_len: 3,
        inline_max_size: 16,
        client_query_buffer_limit: 12,
    };
    let cases: &[&[u8]] = &[
        b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
        b"*1\r\n$4\r\nPINGxx",
        b"*1\r\n$4\r\nPING\r",
        b"*01\r\n$4\r\nPING\r\n",
        b"*1\r\n$04\r\nPING\r\n",
        b"*0\r\n*1\r\n$4\r\nPING\r\n",
        b"*-1\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$4x\r\nPING\r\n",
        b"*1\r\n+4\r\nPING\r\n",
        b"*1\rx$4\rxPING\r\n",
        b"*99999999999999999999\r\n",
        b"*1\r\n$999999999999999999\r\n",
        b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n",
        b"PING\r\n",
        b"  PING  a\tb \r\n",
        b"PING\n",
        b"\r\n\r\nPING\r\n",
        b"SET \"a b\" c\r\n",
        b"SET 'a' c\r\n",
        b"SET a\x0bb\r\n",
        b"SET a\0b\r\n",
        b"SET a\rb\r\n",
        b"PING",
        b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n",
        b"*1\r\n$11\r\nhello world\r\n",
        b"*2\r\n$7\r\n1234567\r\n$7\r\n1234567\r\n",
    ];
    for c in cases {
        same(c, Limits::default());
        same(c, small);
    }
    // Mutations of well-formed pipelines: any byte replaced, any cut.
    let mut rng = Rng::new(7);
    let base: &[u8] = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\nPING a\r\n";
    let alphabet = b"*$\r\n0123456789-+ \t\"'\x00\x0babc";
    for _ in 0..20_000 {
        let mut b = base.to_vec();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(b.len());
            b[i] = alphabet[rng.below(alphabet.len())];
        }
        b.truncate(rng.below(b.len() + 1));
        same(&b, Limits::default());
        same(&b, small);
    }
}
