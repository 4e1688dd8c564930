//! How much a live server lets its clients use: sockets, frame sizes, event rates, timeouts; and
//! the token bucket that enforces the event rate on each connection.

use std::time::{Duration, Instant};

/// The bounds a live server holds its clients to. Every field is public; start from
/// [`Limits::default`] and change what differs.
///
/// # Examples
///
/// ```
/// use galleon_live::Limits;
/// use std::time::Duration;
///
/// let limits = Limits { max_connections: 500, idle_timeout: Duration::from_secs(120),
///     ..Limits::default() };
/// assert_eq!(limits.max_message_bytes, 64 * 1024);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Live sockets open at once; a socket past this is refused. Default 10,000.
    pub max_connections: usize,
    /// The largest frame read from a client, in bytes; a larger one closes the socket.
    /// Default 64 KiB.
    pub max_message_bytes: usize,
    /// Events a connection may send per second, sustained (the token bucket's refill rate).
    /// Default 50.
    pub events_per_second: u32,
    /// Events a connection may send at once after being quiet (the bucket's size). Default 100.
    pub event_burst: u32,
    /// From the socket opening to its first `phx_join`; a socket that never joins is closed.
    /// Default 10 s.
    pub join_timeout: Duration,
    /// With no frame from the client, the socket is closed. The JS client heartbeats every
    /// 30 s, so the default of 90 s tolerates two lost heartbeats.
    pub idle_timeout: Duration,
    /// Views (joined `lv:` channels) one socket may hold at once. Default 16.
    pub max_views_per_socket: usize,
    /// The oldest session token accepted on join. Default two weeks (1,209,600 s), as
    /// Phoenix's session `max_age`.
    pub token_max_age: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 10_000,
            max_message_bytes: 64 * 1024,
            events_per_second: 50,
            event_burst: 100,
            join_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_views_per_socket: 16,
            token_max_age: Duration::from_secs(14 * 24 * 60 * 60),
        }
    }
}

/// Nano-tokens in one token: the bucket counts in these so refill is exact integer arithmetic
/// (`elapsed_ns * rate` nano-tokens), with no float drift.
const NANO: u128 = 1_000_000_000;

/// A token bucket: holds up to `burst` tokens, starts full, refills at `rate_per_s`, and each
/// allowed event takes one. Time comes from the caller, so it is tested without sleeping.
///
/// A `burst` of 0 allows nothing; a `rate_per_s` of 0 allows the first `burst` events and no
/// more.
#[derive(Clone, Debug)]
pub(crate) struct RateLimiter {
    /// Refill rate, tokens per second.
    rate_per_s: u128,
    /// Capacity, in nano-tokens.
    capacity: u128,
    /// Tokens held, in nano-tokens.
    tokens: u128,
    /// When `tokens` was last brought up to date; `None` before the first event.
    last: Option<Instant>,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens refilling at `rate_per_s`.
    pub(crate) fn new(rate_per_s: u32, burst: u32) -> RateLimiter {
        let capacity = u128::from(burst) * NANO;
        RateLimiter {
            rate_per_s: u128::from(rate_per_s),
            capacity,
            tokens: capacity,
            last: None,
        }
    }

    /// Whether an event at `now` is allowed (taking a token if so). An `Instant` earlier than
    /// one seen before adds nothing and does not move the clock back.
    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            if now > last {
                let elapsed = now.duration_since(last).as_nanos();
                let refill = elapsed.saturating_mul(self.rate_per_s);
                self.tokens = self.tokens.saturating_add(refill).min(self.capacity);
                self.last = Some(now);
            }
        } else {
            self.last = Some(now);
        }
        if self.tokens >= NANO {
            self.tokens -= NANO;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(limiter: &mut RateLimiter, now: Instant, tries: usize) -> usize {
        (0..tries).filter(|_| limiter.allow(now)).count()
    }

    #[test]
    fn defaults_are_as_documented() {
        let l = Limits::default();
        assert_eq!(l.max_connections, 10_000);
        assert_eq!(l.max_message_bytes, 65_536);
        assert_eq!(l.events_per_second, 50);
        assert_eq!(l.event_burst, 100);
        assert_eq!(l.join_timeout, Duration::from_secs(10));
        assert_eq!(l.idle_timeout, Duration::from_secs(90));
        assert_eq!(l.max_views_per_socket, 16);
        assert_eq!(l.token_max_age, Duration::from_secs(1_209_600));
    }

    #[test]
    fn a_full_bucket_allows_the_burst_then_refuses() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(50, 100);
        assert_eq!(allowed(&mut r, t0, 150), 100);
        assert!(!r.allow(t0));
    }

    #[test]
    fn refills_at_the_rate_exactly() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(50, 100);
        assert_eq!(allowed(&mut r, t0, 100), 100);
        // One token per 20 ms at 50/s: just short of it, none; at it, one.
        assert!(!r.allow(t0 + Duration::from_nanos(19_999_999)));
        assert!(r.allow(t0 + Duration::from_millis(20)));
        assert!(!r.allow(t0 + Duration::from_millis(20)));
        // A further second brings 50.
        assert_eq!(allowed(&mut r, t0 + Duration::from_millis(1_020), 80), 50);
    }

    #[test]
    fn partial_refills_accumulate_across_calls() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(10, 1);
        assert!(r.allow(t0));
        // 100 ms per token; refused checks at 40 and 80 ms must not lose their fractions.
        assert!(!r.allow(t0 + Duration::from_millis(40)));
        assert!(!r.allow(t0 + Duration::from_millis(80)));
        assert!(r.allow(t0 + Duration::from_millis(100)));
    }

    #[test]
    fn a_quiet_spell_refills_no_more_than_the_burst() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(50, 100);
        assert_eq!(allowed(&mut r, t0, 100), 100);
        let later = t0 + Duration::from_secs(3_600);
        assert_eq!(allowed(&mut r, later, 500), 100);
    }

    #[test]
    fn sustained_traffic_gets_the_rate() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(50, 100);
        assert_eq!(allowed(&mut r, t0, 100), 100);
        // Ten events tried every 10 ms for 10 s: 50 a second get through, 500 in all.
        let got: usize = (1..=1_000)
            .map(|i| allowed(&mut r, t0 + Duration::from_millis(10 * i), 10))
            .sum();
        assert_eq!(got, 500);
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut r = RateLimiter::new(1, 1);
        assert!(r.allow(t0));
        assert!(!r.allow(t0 - Duration::from_secs(5)));
        // The clock stayed at t0: a token comes one second after t0, not after t0 - 5 s.
        assert!(!r.allow(t0 + Duration::from_millis(999)));
        assert!(r.allow(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn zero_burst_allows_nothing_and_zero_rate_never_refills() {
        let t0 = Instant::now();
        let mut none = RateLimiter::new(50, 0);
        assert_eq!(allowed(&mut none, t0, 10), 0);
        assert!(!none.allow(t0 + Duration::from_secs(60)));
        let mut once = RateLimiter::new(0, 3);
        assert_eq!(allowed(&mut once, t0, 10), 3);
        assert!(!once.allow(t0 + Duration::from_secs(1_000_000)));
    }

    #[test]
    fn extreme_settings_do_not_overflow() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(u32::MAX, u32::MAX);
        assert_eq!(allowed(&mut r, t0, 1_000), 1_000);
        assert!(r.allow(t0 + Duration::from_secs(u64::from(u32::MAX))));
    }
}
