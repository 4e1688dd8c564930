//! The live pages' flags of `galleon serve` (`--live`, `--live-*`), converted to the site's
//! `galleon_site::live_pages::LiveConfig`.

use std::time::Duration;

use galleon_live::Limits;
use galleon_site::live_pages::LiveConfig;

/// Longest `--live-*-timeout` and `--live-token-max-age`: a year. Longer is a typo.
const MAX_LIVE_DURATION: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// Largest `--live-max-message-bytes`: 16 MiB (an event is a few hundred bytes).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

fn defaults() -> Limits {
    Limits::default()
}

/// A duration in seconds: more than 0, at most a year.
fn duration(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("expected seconds, got `{s}`"))?;
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero() && *d <= MAX_LIVE_DURATION)
        .map(|_| v)
        .ok_or_else(|| format!("must be more than 0 seconds and at most a year, got {s}"))
}

/// A count of at least 1.
fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("expected a whole number, got `{s}`")),
    }
}

fn message_bytes(s: &str) -> Result<usize, String> {
    let n = positive(s)?;
    if !(256..=MAX_MESSAGE_BYTES).contains(&n) {
        return Err(format!(
            "must be from 256 to {MAX_MESSAGE_BYTES} bytes, got {n}"
        ));
    }
    Ok(n)
}

fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("expected on or off, got `{s}`")),
    }
}

/// The live pages' flags.
#[derive(Debug, clap::Args)]
pub(crate) struct LiveArgs {
    /// Serve the live pages (/live/counter, /live/signup, /live/orders) and their socket
    /// (/live/websocket), driven by Phoenix LiveView's JavaScript client.
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = on_off, action = clap::ArgAction::Set)]
    live: bool,
    /// The secret the live pages' session and CSRF tokens are signed with, at least 32 bytes.
    /// Without it one is generated at start: pages open across a restart reload once.
    #[arg(
        long,
        env = "GALLEON_LIVE_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    live_secret: Option<String>,
    /// Live sockets open at once; more are answered 503.
    #[arg(long, default_value_t = defaults().max_connections, value_name = "N", value_parser = positive)]
    live_max_sockets: usize,
    /// The largest frame read from a live client; a larger one closes its socket (1009).
    #[arg(long, default_value_t = defaults().max_message_bytes, value_name = "BYTES", value_parser = message_bytes)]
    live_max_message_bytes: usize,
    /// Messages a live socket may send per second, sustained (heartbeats aside); more are
    /// answered with the error "rate limited".
    #[arg(long, default_value_t = defaults().events_per_second, value_name = "N")]
    live_events_per_second: u32,
    /// Messages a live socket may send at once after being quiet.
    #[arg(long, default_value_t = defaults().event_burst, value_name = "N")]
    live_event_burst: u32,
    /// Seconds from a live socket opening to its first join, else it is closed.
    #[arg(long, default_value_t = defaults().join_timeout.as_secs_f64(), value_name = "SECS", value_parser = duration)]
    live_join_timeout: f64,
    /// Seconds a live socket may stay silent (the client heartbeats every 30).
    #[arg(long, default_value_t = defaults().idle_timeout.as_secs_f64(), value_name = "SECS", value_parser = duration)]
    live_idle_timeout: f64,
    /// Views one live socket may hold at once.
    #[arg(long, default_value_t = defaults().max_views_per_socket, value_name = "N", value_parser = positive)]
    live_max_views_per_socket: usize,
    /// Seconds a page's session token stays good for joining (a page older rejoins by
    /// reloading).
    #[arg(long, default_value_t = defaults().token_max_age.as_secs_f64(), value_name = "SECS", value_parser = duration)]
    live_token_max_age: f64,
}

impl LiveArgs {
    pub(crate) fn config(&self) -> anyhow::Result<LiveConfig> {
        if let Some(s) = &self.live_secret
            && s.len() < 32
        {
            anyhow::bail!(
                "--live-secret (GALLEON_LIVE_SECRET) must be at least 32 bytes, got {}",
                s.len()
            );
        }
        Ok(LiveConfig {
            enabled: self.live,
            limits: Limits {
                max_connections: self.live_max_sockets,
                max_message_bytes: self.live_max_message_bytes,
                events_per_second: self.live_events_per_second,
                event_burst: self.live_event_burst,
                join_timeout: Duration::from_secs_f64(self.live_join_timeout),
                idle_timeout: Duration::from_secs_f64(self.live_idle_timeout),
                max_views_per_socket: self.live_max_views_per_socket,
                token_max_age: Duration::from_secs_f64(self.live_token_max_age),
            },
            secret: self.live_secret.as_ref().map(|s| s.as_bytes().to_vec()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        live: LiveArgs,
    }

    fn parse(args: &[&str]) -> Result<LiveConfig, String> {
        let argv = std::iter::once("galleon").chain(args.iter().copied());
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.live.config().map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_are_the_librarys() {
        let c = parse(&[]).unwrap();
        assert!(c.enabled);
        assert_eq!(c.limits, Limits::default());
        assert!(c.secret.is_none());
    }

    #[test]
    fn every_limit_has_its_flag() {
        let c = parse(&[
            "--live",
            "off",
            "--live-max-sockets",
            "7",
            "--live-max-message-bytes",
            "4096",
            "--live-events-per-second",
            "3",
            "--live-event-burst",
            "4",
            "--live-join-timeout",
            "1.5",
            "--live-idle-timeout",
            "20",
            "--live-max-views-per-socket",
            "2",
            "--live-token-max-age",
            "3600",
            "--live-secret",
            &"s".repeat(32),
        ])
        .unwrap();
        assert!(!c.enabled);
        let l = c.limits;
        assert_eq!((l.max_connections, l.max_message_bytes), (7, 4096));
        assert_eq!(
            (l.events_per_second, l.event_burst, l.max_views_per_socket),
            (3, 4, 2)
        );
        assert_eq!(l.join_timeout, Duration::from_millis(1500));
        assert_eq!(l.idle_timeout, Duration::from_secs(20));
        assert_eq!(l.token_max_age, Duration::from_secs(3600));
        assert_eq!(c.secret.unwrap().len(), 32);
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let e = parse(&["--live-secret", "short"]).unwrap_err();
        assert!(e.contains("at least 32 bytes"), "{e}");
        for (flag, v, says) in [
            ("--live-idle-timeout", "0", "more than 0"),
            ("--live-join-timeout", "1e12", "at most a year"),
            ("--live-join-timeout", "soon", "expected seconds"),
            ("--live-max-sockets", "0", "at least 1"),
            ("--live-max-message-bytes", "10", "from 256"),
            ("--live", "maybe", "on or off"),
        ] {
            let e = parse(&[flag, v]).unwrap_err();
            assert!(e.contains(says), "{flag} {v}: {e}");
        }
    }
}
