//! `galleon serve`: the example site over HTTP/1.1 (see [`crate::site`] for the routes) and the
//! event store named by `--events` (see [`crate::events`]): `POST /streams/{id}`,
//! `GET /streams/{id}`, `GET /all` and `GET /all/subscribe` (server-sent events).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use galleon_http::{Server, ServerConfig, WritePolicy, shutdown_signal};

/// Arguments of `galleon serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The site directory: pages/*.html.eex, data/*.json, static/, layout.html.eex.
    #[arg(long, default_value = "site", value_name = "DIR")]
    site: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4000", value_name = "HOST:PORT")]
    addr: SocketAddr,
    /// Write policy for every response: default, flatten or vectored (a request may pick its own
    /// with the `x-galleon-write-policy` header).
    #[arg(long, default_value = "default", value_parser = parse_policy)]
    write_policy: WritePolicy,
    /// Copy runs of segments shorter than this many bytes into one buffer (overrides the policy's).
    #[arg(long, value_name = "BYTES")]
    coalesce_below: Option<usize>,
    /// Most iovecs per writev call (overrides the policy's; 1..=1024).
    #[arg(long, value_name = "N")]
    max_iov: Option<usize>,
    /// Log every write call and its segments to stderr.
    #[arg(long)]
    trace_writes: bool,
    /// Serve recorded traces at /.galleon/trace/TOKEN (what `galleon trace` reads). On by default
    /// when listening on a loopback address, off otherwise: a trace shows memory addresses.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    trace_endpoint: Option<bool>,
    /// Bytes rendered per chunk of a streamed page (`/doom`).
    #[arg(long, default_value_t = crate::site::DEFAULT_STREAM_CHUNK, value_name = "BYTES")]
    chunk_bytes: usize,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Most connections open at once; more get 503.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_BODY_BYTES, value_name = "BYTES")]
    max_body: u64,
    /// Seconds allowed to receive a request head.
    #[arg(long, default_value_t = galleon_http::DEFAULT_HEADER_READ_TIMEOUT.as_secs_f64(), value_name = "SECS")]
    header_timeout: f64,
    /// Seconds a kept-alive connection may wait for its next request.
    #[arg(long, default_value_t = galleon_http::DEFAULT_IDLE_TIMEOUT.as_secs_f64(), value_name = "SECS")]
    idle_timeout: f64,
    /// The event store: `sqlite:PATH` (file and directories created on first start) or
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB`; `off` serves none. Mounted at
    /// `POST /streams/{id}` (header `ES-Expected-Version`), `GET /streams/{id}?from=&limit=&direction=`,
    /// `GET /all?from=&limit=` and `GET /all/subscribe?from=` (server-sent events). The server
    /// does not start when the store cannot be opened.
    #[arg(
        long,
        env = "GALLEON_EVENTS",
        hide_env_values = true,
        default_value = crate::events::DEFAULT_EVENTS_URL,
        value_name = "URL"
    )]
    events: String,
    /// PostgreSQL only: the schema holding the event store's tables, created when missing
    /// (default: the connection's search_path, normally `public`).
    #[arg(long, value_name = "NAME")]
    events_schema: Option<String>,
    /// Seconds of silence after which `GET /all/subscribe` sends a keep-alive comment, so
    /// proxies do not cut an idle subscription.
    #[arg(long, default_value_t = crate::events::DEFAULT_KEEP_ALIVE.as_secs_f64(), value_name = "SECS")]
    events_keep_alive: f64,
}

fn parse_policy(s: &str) -> Result<WritePolicy, String> {
    WritePolicy::from_name(s)
        .ok_or_else(|| format!("unknown policy `{s}` (default, flatten, vectored)"))
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("expected on or off, got `{s}`")),
    }
}

fn secs(v: f64, what: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v).with_context(|| format!("--{what}: not a duration in seconds"))
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let mut policy = args.write_policy;
    if let Some(c) = args.coalesce_below {
        policy.coalesce_below = c;
    }
    if let Some(m) = args.max_iov {
        policy.max_iov = m;
    }
    let mut config = ServerConfig::default();
    config.write_policy = policy;
    config.trace_writes = args.trace_writes;
    config.trace_endpoint = args
        .trace_endpoint
        .unwrap_or_else(|| args.addr.ip().is_loopback());
    config.limits.max_connections = args.max_connections;
    config.limits.max_body_bytes = args.max_body;
    config.limits.header_read_timeout = secs(args.header_timeout, "header-timeout")?;
    config.limits.idle_timeout = secs(args.idle_timeout, "idle-timeout")?;
    let events = crate::events::EventsConfig {
        url: args.events.clone(),
        schema: args.events_schema.clone(),
        keep_alive: secs(args.events_keep_alive, "events-keep-alive")?,
    };
    anyhow::ensure!(
        !events.keep_alive.is_zero(),
        "--events-keep-alive must be more than 0 seconds"
    );
    // Warnings and errors (a failing event store, a broken stream) go to stderr; RUST_LOG overrides.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();

    let workers = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let router = crate::site::router(&args.site, args.chunk_bytes)
        .with_context(|| format!("loading the site in {}", args.site.display()))?;

    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    rt.worker_threads(workers.max(1));
    let rt = rt.build()?;
    rt.block_on(async move {
        let router = match crate::events::open(&events).await? {
            Some(store) => {
                eprintln!(
                    "galleon: event store {} ({})",
                    crate::events::redact(&events.url),
                    store.backend_name()
                );
                crate::events::mount(router, store, events.keep_alive)
            }
            None => router,
        };
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("binding {}", args.addr))?;
        let addr = listener.local_addr()?;
        eprintln!(
            "galleon: serving {} at http://{addr}/ (write policy {:?}{}{})",
            args.site.display(),
            policy,
            if config.trace_writes {
                ", tracing writes"
            } else {
                ""
            },
            if config.trace_endpoint {
                ", trace endpoint on"
            } else {
                ""
            },
        );
        let summary = Server::new(router, config)
            .serve(listener, async {
                shutdown_signal().await;
                eprintln!("galleon: shutting down (in-flight responses finish first)");
            })
            .await?;
        eprintln!(
            "galleon: stopped after {} connections ({} refused, {} aborted at shutdown)",
            summary.connections, summary.refused, summary.aborted
        );
        anyhow::Ok(())
    })
}
