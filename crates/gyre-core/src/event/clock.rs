//! The cached clock (nginx's `ngx_time_update`).
//!
//! The event loop reads the monotonic clock once per wake-up and every handler
//! reads the cached value, so a busy iteration costs one `clock_gettime` (a vDSO
//! call) instead of one per timer operation. The wall clock is read at the same
//! moment and cached as an RFC 7231 date string for protocol modules (`Date:`),
//! re-formatted at most once a second.
//!
//! Times are [`Msec`]: absolute milliseconds of a monotonic clock. They may wrap
//! (a clock can start anywhere, and on 32-bit nginx they do every 49 days), so
//! they are only ever compared by wrapping signed difference ([`msec_before`]),
//! the way the Linux kernel compares jiffies.

use std::time::{SystemTime, UNIX_EPOCH};

/// Absolute milliseconds of the monotonic clock; compare with [`msec_before`]
/// or [`msec_diff`], never with `<`.
pub type Msec = u64;

/// Signed distance `a - b` in milliseconds, correct across wraparound as long
/// as the two times are less than 2^63 ms apart.
#[inline]
pub fn msec_diff(a: Msec, b: Msec) -> i64 {
    a.wrapping_sub(b) as i64
}

/// True when `a` is strictly earlier than `b` (wraparound-safe).
#[inline]
pub fn msec_before(a: Msec, b: Msec) -> bool {
    msec_diff(a, b) < 0
}

/// Reads the monotonic clock in milliseconds.
#[inline]
pub fn monotonic_ms() -> Msec {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (ts.tv_sec as u64)
        .wrapping_mul(1000)
        .wrapping_add(ts.tv_nsec as u64 / 1_000_000)
}

/// The loop's cached time.
#[derive(Debug)]
pub struct Clock {
    /// Added to the kernel's monotonic value; lets tests start the clock just
    /// before the wrap point.
    offset: Msec,
    now: Msec,
    unix_ms: u64,
    unix_secs: u64,
    http_date: String,
}

impl Clock {
    /// A clock whose readings are the kernel's monotonic milliseconds.
    pub fn new() -> Clock {
        Clock::with_offset(0)
    }

    /// A clock shifted by `offset` ms (wrapping), for exercising wraparound.
    pub fn with_offset(offset: Msec) -> Clock {
        let mut c = Clock {
            offset,
            now: 0,
            unix_ms: 0,
            unix_secs: u64::MAX,
            http_date: String::with_capacity(29),
        };
        c.update();
        c
    }

    /// Re-reads the clocks (nginx's `ngx_time_update`). Called by the loop once
    /// per wake-up; handlers never need to.
    pub fn update(&mut self) {
        self.now = monotonic_ms().wrapping_add(self.offset);
        self.unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let secs = self.unix_ms / 1000;
        if secs != self.unix_secs {
            self.unix_secs = secs;
            self.http_date.clear();
            format_http_date(secs, &mut self.http_date);
        }
    }

    /// The cached monotonic time in ms.
    #[inline]
    pub fn now(&self) -> Msec {
        self.now
    }

    /// The cached wall-clock time in milliseconds since the Unix epoch
    /// (what Redis's EXPIREAT and TTLs are measured in).
    #[inline]
    pub fn unix_ms(&self) -> u64 {
        self.unix_ms
    }

    /// The cached wall-clock time in seconds since the Unix epoch.
    #[inline]
    pub fn unix_secs(&self) -> u64 {
        self.unix_secs
    }

    /// The cached wall-clock time as an IMF-fixdate, e.g.
    /// `Sun, 06 Nov 1994 08:49:37 GMT`.
    #[inline]
    pub fn http_date(&self) -> &str {
        &self.http_date
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// English month abbreviations, as HTTP dates and nginx's logs write them.
pub const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A Unix time broken down in UTC, for the date formats of HTTP and of
/// nginx's error and access logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CivilTime {
    pub year: i64,
    /// 1..=12.
    pub month: u32,
    /// 1..=31.
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// 0 = Sunday.
    pub weekday: u32,
}

impl CivilTime {
    /// `secs` since the Unix epoch, in UTC.
    pub fn from_unix(secs: u64) -> CivilTime {
        let days = secs / 86_400;
        let rem = (secs % 86_400) as u32;
        let (year, month, day) = civil_from_days(days as i64);
        CivilTime {
            year,
            month,
            day,
            hour: rem / 3600,
            min: rem % 3600 / 60,
            sec: rem % 60,
            // 1970-01-01 was a Thursday.
            weekday: ((days + 4) % 7) as u32,
        }
    }

    /// The month's English abbreviation.
    pub fn month_name(&self) -> &'static str {
        MONTHS[(self.month.clamp(1, 12) - 1) as usize]
    }
}

/// Appends `secs` (Unix time) as an IMF-fixdate (RFC 7231 §7.1.1.1).
///
/// Written by hand into a fixed buffer: `expires` formats one per response,
/// and `write!`'s machinery was 2,600 instructions of it (callgrind).
pub fn format_http_date(secs: u64, out: &mut String) {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    let t = CivilTime::from_unix(secs);
    if (0..=9999).contains(&t.year) {
        let two = |b: &mut [u8], n: u32| {
            b[0] = b'0' + (n / 10 % 10) as u8;
            b[1] = b'0' + (n % 10) as u8;
        };
        let y = t.year as u32;
        let mut b = *b"Sun, 00 Jan 0000 00:00:00 GMT";
        b[..3].copy_from_slice(DAYS[t.weekday as usize % 7].as_bytes());
        two(&mut b[5..7], t.day);
        b[8..11].copy_from_slice(t.month_name().as_bytes());
        two(&mut b[12..14], y / 100);
        two(&mut b[14..16], y % 100);
        two(&mut b[17..19], t.hour);
        two(&mut b[20..22], t.min);
        two(&mut b[23..25], t.sec);
        out.push_str(std::str::from_utf8(&b).unwrap_or_default());
        return;
    }
    use std::fmt::Write;
    let _ = write!(
        out,
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[t.weekday as usize],
        t.day,
        t.month_name(),
        t.year,
        t.hour,
        t.min,
        t.sec
    );
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31), proleptic
/// Gregorian (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_survives_wraparound() {
        let before_wrap = u64::MAX - 5;
        let after_wrap = 10u64;
        assert!(msec_before(before_wrap, after_wrap));
        assert!(!msec_before(after_wrap, before_wrap));
        assert_eq!(msec_diff(after_wrap, before_wrap), 16);
        assert_eq!(msec_diff(before_wrap, after_wrap), -16);
    }

    #[test]
    fn http_dates() {
        let mut s = String::new();
        format_http_date(784_111_777, &mut s);
        assert_eq!(s, "Sun, 06 Nov 1994 08:49:37 GMT");
        s.clear();
        format_http_date(0, &mut s);
        assert_eq!(s, "Thu, 01 Jan 1970 00:00:00 GMT");
        s.clear();
        format_http_date(951_782_400, &mut s); // leap day 2000
        assert_eq!(s, "Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn offset_clock_starts_near_the_wrap() {
        let c = Clock::with_offset(u64::MAX - monotonic_ms() - 100);
        assert!(msec_diff(0, c.now()) > 0);
        assert_eq!(c.http_date().len(), 29);
    }
}
