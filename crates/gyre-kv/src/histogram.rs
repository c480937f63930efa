//! The per-command latency histogram behind INFO latencystats and
//! LATENCY HISTOGRAM (Redis keeps an HdrHistogram per command, tracking 1
//! ns to 1 s at 2 significant digits).
//!
//! The layout is the same log-linear one, so the reported values round as
//! Redis's do: values below 256 ns are exact; above, each power-of-two
//! range [2^k, 2^(k+1)) is cut into 128 equal sub-buckets, so a value is
//! known to within 1/128 of itself (better than 1 %). With 1 s as the top
//! that is 24 half-buckets of 128 counters (3,072, 24 KiB), allocated on
//! a command's first call as Redis allocates its histogram.
//!
//! Recording is a `leading_zeros`, two shifts and an add: cheap enough to
//! stay on for every command (`latency-tracking yes` is the default).

/// Redis's `LATENCY_HISTOGRAM_MIN_VALUE` / `_MAX_VALUE` (ns): values
/// outside are clamped, as `updateCommandLatencyHistogram` does.
pub const MIN_NS: u64 = 1;
pub const MAX_NS: u64 = 1_000_000_000;

/// log2 of half the sub-buckets per power of two (256 sub-buckets give
/// 2 significant digits: 2 * 10^2 rounded up to a power of two).
const HALF_MAG: u32 = 7;
const HALF: usize = 1 << HALF_MAG;
/// Power-of-two ranges needed to hold [`MAX_NS`] above the first 256.
const BUCKETS: usize = 23;
const LEN: usize = (BUCKETS + 1) * HALF;

#[derive(Clone)]
pub struct Histogram {
    counts: [u64; LEN],
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .finish()
    }
}

/// Which power-of-two range `v` falls in (0 for the first 256 values).
#[inline]
fn bucket_of(v: u64) -> u32 {
    // The smallest power of two above v (at least 256), as an exponent,
    // minus the 8 bits of the first range.
    (64 - (v | (2 * HALF as u64 - 1)).leading_zeros()) - (HALF_MAG + 1)
}

#[inline]
fn index_of(v: u64) -> usize {
    let b = bucket_of(v);
    let sub = (v >> b) as usize;
    (((b as usize) + 1) << HALF_MAG) + sub - HALF
}

/// The smallest value counted at `index`.
fn value_at(index: usize) -> u64 {
    let mut b = (index >> HALF_MAG) as i64 - 1;
    let mut sub = (index & (HALF - 1)) + HALF;
    if b < 0 {
        sub -= HALF;
        b = 0;
    }
    (sub as u64) << b
}

/// The smallest value counted with `v`.
fn lowest_equivalent(v: u64) -> u64 {
    let b = bucket_of(v);
    (v >> b) << b
}

/// The largest value counted with `v`.
fn highest_equivalent(v: u64) -> u64 {
    lowest_equivalent(v) + (1u64 << bucket_of(v)) - 1
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; LEN],
            total: 0,
        }
    }
}

impl Histogram {
    /// Count one command that took `ns` (clamped to 1 ns .. 1 s).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let v = ns.clamp(MIN_NS, MAX_NS);
        // In range by construction (MAX_NS < 256 << BUCKETS).
        if let Some(c) = self.counts.get_mut(index_of(v)) {
            *c += 1;
            self.total += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Redis's `hdr_value_at_percentile` (ns): the value below which
    /// `p` percent of the calls fall, as its range's highest value (its
    /// lowest for p0).
    pub fn value_at_percentile(&self, p: f64) -> u64 {
        let p = p.min(100.0);
        let want = ((((p / 100.0) * self.total as f64) + 0.5) as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                let v = value_at(i);
                return if p == 0.0 {
                    lowest_equivalent(v)
                } else {
                    highest_equivalent(v)
                };
            }
        }
        0
    }

    /// The cumulative distribution LATENCY HISTOGRAM replies with (Redis's
    /// `fillCommandCDF` over a log-2 iteration from 1024 ns): for each
    /// power of two from 1024 ns, the calls up to the top of its range,
    /// as (that top in whole microseconds, cumulative calls), only where
    /// the count grew.
    pub fn cdf(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut level: u64 = 1024;
        let mut idx: usize = 0;
        let mut seen = self.counts[0];
        let mut prev = 0;
        while seen < self.total || idx + 1 < LEN && value_at(idx + 1) > lowest_equivalent(level) {
            // Advance to the first index at or past the level.
            while value_at(idx) < lowest_equivalent(level) && idx + 1 < LEN {
                idx += 1;
                seen += self.counts[idx];
            }
            let top = highest_equivalent(value_at(idx)) / 1000;
            if seen > prev {
                out.push((top, seen));
            }
            prev = seen;
            if idx + 1 >= LEN {
                break;
            }
            level = level.saturating_mul(2);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_round_as_hdr_histogram_at_two_digits() {
        // Exact below 256 ns.
        assert_eq!(
            (lowest_equivalent(200), highest_equivalent(200)),
            (200, 200)
        );
        // 10 us falls in [8192, 16384): width 64.
        assert_eq!(lowest_equivalent(10_000), 9_984);
        assert_eq!(highest_equivalent(10_000), 10_047);
        assert_eq!(highest_equivalent(1_000), 1_003);
        assert_eq!(highest_equivalent(4_000), 4_015);
        for v in [1u64, 255, 256, 1023, 1024, 99_999, MAX_NS] {
            let i = index_of(v);
            assert!(i < LEN);
            assert_eq!(value_at(i), lowest_equivalent(v), "{v}");
        }
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = Histogram::default();
        for _ in 0..99 {
            h.record(4_000);
        }
        h.record(57_000);
        assert_eq!(h.total(), 100);
        assert_eq!(h.value_at_percentile(50.0), 4_015);
        assert_eq!(h.value_at_percentile(99.0), 4_015);
        assert_eq!(h.value_at_percentile(99.9), highest_equivalent(57_000));
        assert_eq!(h.value_at_percentile(100.0), highest_equivalent(57_000));
        assert_eq!(h.value_at_percentile(0.0), lowest_equivalent(4_000));
        // Clamped to the tracked range.
        h.record(0);
        h.record(5_000_000_000);
        assert_eq!(h.value_at_percentile(0.0), 1);
        assert_eq!(h.value_at_percentile(100.0), highest_equivalent(MAX_NS));
    }

    #[test]
    fn cdf_matches_redis_buckets() {
        // redis-server 7.0.15, two GETs of about 4 and 7 us:
        // histogram_usec {4: 1, 8: 2}.
        let mut h = Histogram::default();
        h.record(4_000);
        h.record(7_000);
        assert_eq!(h.cdf(), vec![(4, 1), (8, 2)]);
        // One call of 57 us: {66: 1}; one under a microsecond: {1: 1}.
        let mut h = Histogram::default();
        h.record(57_000);
        assert_eq!(h.cdf(), vec![(66, 1)]);
        let mut h = Histogram::default();
        h.record(300);
        assert_eq!(h.cdf(), vec![(1, 1)]);
        // Every level up to the largest value, cumulative.
        let mut h = Histogram::default();
        h.record(500);
        h.record(MAX_NS);
        let c = h.cdf();
        assert_eq!(c.first(), Some(&(1, 1)));
        assert_eq!(c.last().map(|x| x.1), Some(2));
        assert_eq!(c.len(), 2);
    }
}
