//! `galleon trace PATH`: asks a running `galleon serve` for PATH with `x-galleon-trace: TOKEN`,
//! reads (and discards) the response, then fetches `/.galleon/trace/TOKEN` on the same
//! connection and prints the write calls of that one response and their summary.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use galleon_client::Client;
use galleon_http::{TRACE_HEADER, TRACE_PATH_PREFIX};

/// How long `galleon trace` waits on any one read or write before giving up: 30 s covers a
/// large page on a busy machine; a stalled server is reported instead of waited on forever.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Arguments of `galleon trace`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The path (and query) to request, e.g. `/blah?iters=10`.
    path: String,
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1:4000", value_name = "HOST:PORT")]
    addr: String,
    /// Ask the server to write this response under another policy: default, flatten or vectored.
    #[arg(long, value_name = "POLICY")]
    write_policy: Option<String>,
}

/// Counts what it swallows.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if !args.path.starts_with('/') {
        bail!("PATH must start with '/', got `{}`", args.path);
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let token = format!("t{:x}{:x}", std::process::id(), nanos);
    let mut client = Client::connect(args.addr.as_str(), IO_TIMEOUT)
        .with_context(|| format!("connecting to {}", args.addr))?;
    let mut headers = vec![(TRACE_HEADER, token.as_str())];
    if let Some(p) = &args.write_policy {
        headers.push((crate::serve::POLICY_HEADER, p.as_str()));
    }
    let mut counter = Counter(0);
    let resp = client
        .request_to("GET", &args.path, &headers, &mut counter)
        .with_context(|| format!("requesting {}", args.path))?;
    let trace = client
        .get(&format!("{TRACE_PATH_PREFIX}{token}"), &[])
        .context("fetching the trace")?;
    if trace.status == 404 {
        bail!(
            "{} returned {} ({} body bytes) but no trace: is the server a `galleon serve` with \
             `--trace-endpoint on`?",
            args.path,
            resp.status,
            counter.0
        );
    }
    if trace.status != 200 {
        bail!(
            "the trace endpoint answered {}: {}",
            trace.status,
            trace.text()
        );
    }
    let mut out = io::stdout().lock();
    out.write_all(&trace.body)?;
    writeln!(
        out,
        "response: status={} body_bytes={}",
        resp.status, counter.0
    )?;
    Ok(())
}
