//! Parsing of HTTP dates (If-Modified-Since, If-Range).
//!
//! Formatting lives in gyre-core's clock (it is cached per second); parsing
//! is only needed here and accepts the three forms RFC 9110 requires a
//! recipient to understand.

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) or asctime (`Sun Nov  6 08:49:37 1994`)
/// date into Unix seconds. The weekday is not checked (nginx ignores it).
pub fn parse_http_date(s: &[u8]) -> Option<u64> {
    let s = trim(s);
    let (day, month, year, time) = if let Some(c) = s.iter().position(|&b| b == b',') {
        let rest = trim(&s[c + 1..]);
        if rest.len() > 2 && rest[2] == b'-' {
            // RFC 850: 06-Nov-94 08:49:37 GMT
            let day = num(&rest[0..2])?;
            let month = month(rest.get(3..6)?)?;
            if rest.get(6) != Some(&b'-') {
                return None;
            }
            let y = num(rest.get(7..9)?)?;
            let year = if y < 70 { 2000 + y } else { 1900 + y };
            let t = rest.get(9..)?;
            (day, month, year, gmt_time(t)?)
        } else {
            // IMF-fixdate: 06 Nov 1994 08:49:37 GMT
            let day = num(rest.get(0..2)?)?;
            if rest.get(2) != Some(&b' ') {
                return None;
            }
            let month = month(rest.get(3..6)?)?;
            if rest.get(6) != Some(&b' ') {
                return None;
            }
            let year = num(rest.get(7..11)?)?;
            (day, month, year, gmt_time(rest.get(11..)?)?)
        }
    } else {
        // asctime: Sun Nov  6 08:49:37 1994
        if s.get(3) != Some(&b' ') {
            return None;
        }
        let month = month(s.get(4..7)?)?;
        if s.get(7) != Some(&b' ') {
            return None;
        }
        let d = s.get(8..10)?;
        let day = if d[0] == b' ' { num(&d[1..])? } else { num(d)? };
        if s.get(10) != Some(&b' ') {
            return None;
        }
        let time = hms(s.get(11..19)?)?;
        if s.get(19) != Some(&b' ') || s.len() != 24 {
            return None;
        }
        let year = num(&s[20..24])?;
        (day, month, year, time)
    };
    if !(1..=31).contains(&day) || !(1970..=9999).contains(&year) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if days_in_month(year, month) < day {
        return None;
    }
    Some(days * 86_400 + time)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' '] = s {
        s = rest;
    }
    s
}

fn num(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |a, &b| a * 10 + u64::from(b - b'0')))
}

fn month(s: &[u8]) -> Option<u64> {
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(s))
        .map(|i| i as u64 + 1)
}

/// ` 08:49:37 GMT`
fn gmt_time(s: &[u8]) -> Option<u64> {
    if s.len() != 13 || s[0] != b' ' || &s[9..] != b" GMT" {
        return None;
    }
    hms(&s[1..9])
}

fn hms(s: &[u8]) -> Option<u64> {
    if s.len() != 8 || s[2] != b':' || s[5] != b':' {
        return None;
    }
    let (h, m, sec) = (num(&s[0..2])?, num(&s[3..5])?, num(&s[6..8])?);
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    Some(h * 3600 + m * 60 + sec)
}

fn is_leap(y: u64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (year >= 1970).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let mut days = 0;
    for yy in 1970..y {
        days += if is_leap(yy) { 366 } else { 365 };
    }
    for mm in 1..m {
        days += days_in_month(y, mm);
    }
    days + d - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_formats() {
        let want = Some(784_111_777);
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), want);
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), want);
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), want);
        assert_eq!(parse_http_date(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date(b"Tue, 29 Feb 2000 23:59:59 GMT"),
            Some(951_868_799)
        );
        assert_eq!(
            parse_http_date(b"Sun, 29 Nov 2026 22:34:06 GMT"),
            Some(1_795_991_646)
        );
    }

    #[test]
    fn rejects() {
        for s in [
            &b""[..],
            b"garbage",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 31 Feb 1994 08:49:37 GMT",
            b"Sun, 06 Foo 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 25:49:37 GMT",
            b"Sun, 6 Nov 1994 08:49:37 GMT",
            b"Sun Nov  6 08:49:37 94",
            b"Sun, 06 Nov 1969 08:49:37 GMT",
            b"Sun,",
            b"Sunday, 06-Nov-9",
        ] {
            assert_eq!(parse_http_date(s), None, "{:?}", String::from_utf8_lossy(s));
        }
    }
}
