//! [`Timestamp`]: when an event was recorded, as microseconds since the Unix epoch (UTC), the
//! precision PostgreSQL's `timestamptz` keeps; shown as RFC 3339.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time in microseconds since 1970-01-01T00:00:00Z (negative before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The timestamp `micros` microseconds after the Unix epoch.
    pub const fn from_micros(micros: i64) -> Timestamp {
        Timestamp(micros)
    }

    /// Now, by the system clock.
    pub fn now() -> Timestamp {
        Timestamp::from(SystemTime::now())
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Timestamp {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp(i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
            Err(e) => Timestamp(-i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX)),
        }
    }
}

impl From<Timestamp> for SystemTime {
    fn from(t: Timestamp) -> SystemTime {
        let d = Duration::from_micros(t.0.unsigned_abs());
        if t.0 >= 0 {
            UNIX_EPOCH + d
        } else {
            UNIX_EPOCH - d
        }
    }
}

/// A timestamp's calendar fields in UTC.
struct Parts {
    year: i64,
    month: u32,
    day: u32,
    /// Seconds into the day.
    secs: i64,
    micros: i64,
}

impl Timestamp {
    fn parts(self) -> Parts {
        let secs = self.0.div_euclid(1_000_000);
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        Parts {
            year,
            month,
            day,
            secs: secs.rem_euclid(86_400),
            micros: self.0.rem_euclid(1_000_000),
        }
    }

    /// Appends what `Display` prints, without the formatting machinery for years 0 to 9999:
    /// every event written as JSON or SSE carries one.
    ///
    /// # Examples
    /// ```
    /// use galleon_eventstore::Timestamp;
    ///
    /// let mut out = Vec::new();
    /// Timestamp::from_micros(1_709_251_199_500_000).write_rfc3339(&mut out);
    /// assert_eq!(out, b"2024-02-29T23:59:59.500000Z");
    /// ```
    pub fn write_rfc3339(self, out: &mut Vec<u8>) {
        let p = self.parts();
        let Ok(year) = u64::try_from(p.year) else {
            return out.extend_from_slice(self.to_string().as_bytes());
        };
        if year > 9999 {
            return out.extend_from_slice(self.to_string().as_bytes());
        }
        // All fields are in range here: each fits its width.
        let fields = [
            (year, 4, b'-'),
            (u64::from(p.month), 2, b'-'),
            (u64::from(p.day), 2, b'T'),
            ((p.secs / 3600) as u64, 2, b':'),
            ((p.secs / 60 % 60) as u64, 2, b':'),
            ((p.secs % 60) as u64, 2, b'.'),
            (p.micros as u64, 6, b'Z'),
        ];
        for (value, width, after) in fields {
            let mut v = value;
            let start = out.len();
            out.resize(start + width, b'0');
            for slot in out[start..].iter_mut().rev() {
                *slot = b'0' + (v % 10) as u8;
                v /= 10;
            }
            out.push(after);
        }
    }
}

/// RFC 3339 in UTC with microseconds: `2026-11-25T06:22:40.123456Z`.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Parts {
            year: y,
            month: m,
            day: d,
            secs: rem,
            micros,
        } = self.parts();
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    }
}

/// Year, month, day of the `days`-th day after 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
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
    fn formats_rfc3339() {
        assert_eq!(
            Timestamp::from_micros(0).to_string(),
            "1970-01-01T00:00:00.000000Z"
        );
        // 2024-02-29T23:59:59.5Z (a leap day), checked with `date -u -d @1709251199`.
        assert_eq!(
            Timestamp::from_micros(1_709_251_199_500_000).to_string(),
            "2024-02-29T23:59:59.500000Z"
        );
        assert_eq!(
            Timestamp::from_micros(-1).to_string(),
            "1969-12-31T23:59:59.999999Z"
        );
        let now = SystemTime::now();
        for micros in [
            0,
            -1,
            1,
            999_999,
            1_709_251_199_500_000,
            -62_167_219_200_000_000,
            -62_167_219_200_000_001,
            253_402_300_799_999_999,
            253_402_300_800_000_000,
            i64::MAX,
            i64::MIN,
            Timestamp::from(now).as_micros(),
        ] {
            let t = Timestamp::from_micros(micros);
            let mut out = Vec::new();
            t.write_rfc3339(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), t.to_string(), "{micros}");
        }
        let t = Timestamp::from(now);
        assert_eq!(Timestamp::from(SystemTime::from(t)), t);
    }
}
