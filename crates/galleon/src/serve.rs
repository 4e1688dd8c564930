//! `galleon serve`: the example site over HTTP/1.1 (see [`galleon_site`] for the routes), the
//! event store named by `--events` with its HTTP API ([`galleon_eventstore_http`]), and the
//! statistics pages ([`galleon_stats`]).
//!
//! Every flag is range-checked at start, naming it; the open-file limit is raised and
//! `--max-connections` fitted under it. `serve` opens the site (`galleon_site::Site::open`: pages,
//! compiled pages, rules, pool routes, reload triggers) from its flags (`site_args.rs`), and adds
//! the event store (`events.rs`), the diagnostics routes and, with `--trace-endpoint on`, the
//! trace route; it enables the `x-galleon-write-policy` header, gives the server the CPU pool
//! (`Server::with_offload`) and its observer (`--stats`, `--access-log`), and joins the pool at
//! exit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use galleon_http::{Server, ServerConfig, TraceStore, WritePolicy, shutdown_signal};

/// Request header that picks the write policy of its response: `default`, `flatten` or
/// `vectored` (how `bench/http.sh` compares policies against one server).
pub(crate) const POLICY_HEADER: &str = "x-galleon-write-policy";

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
    #[arg(long, default_value = "default", value_parser = clap::value_parser!(WritePolicy))]
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
    /// Record the writes of requests carrying `x-galleon-trace: TOKEN` and serve them at
    /// /.galleon/trace/TOKEN, to loopback peers only (what `galleon trace` reads). Off by
    /// default: a trace holds memory and shows the server's addresses.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    trace_endpoint: Option<bool>,
    /// Bytes rendered per chunk of a streamed page (`/doom`).
    #[arg(long, default_value_t = galleon_site::pages::DEFAULT_STREAM_CHUNK, value_name = "BYTES")]
    chunk_bytes: usize,
    /// Pages that end within this many bytes are sent whole with `content-length`; longer
    /// ones are streamed in `--chunk-bytes` chunks (the most of a page a connection holds).
    #[arg(long, default_value_t = galleon_site::pages::DEFAULT_FULL_BODY_MAX, value_name = "BYTES")]
    full_body_max: usize,
    /// Bytes of whole pages all connections together may hold unwritten: a page stays in
    /// memory until a slow reader has taken it. Past it, pages of 64 KiB or more are streamed
    /// in --chunk-bytes chunks instead (0: always).
    #[arg(long, default_value_t = galleon_site::whole::DEFAULT_MAX_WHOLE_PAGES, value_name = "BYTES")]
    max_whole_pages: usize,
    /// Strings and safe HTML from assigns shorter than this are copied into the render's buffer,
    /// longer ones referenced (one reference count each); 0 references every one.
    #[arg(long, default_value_t = galleon_template::DEFAULT_VALUE_COPY_BELOW, value_name = "BYTES")]
    value_copy_below: usize,
    /// Template work allowed per render (per chunk of a streamed page): operations plus
    /// expression nodes evaluated; past it the render fails (500, or 400 when the query's values
    /// caused it).
    #[arg(long, default_value_t = galleon_template::DEFAULT_MAX_STEPS, value_name = "N")]
    max_template_steps: u64,
    /// Bytes of values (strings, lists, maps) a render may build (per chunk of a streamed page),
    /// counted as they are built and before a large one is allocated; past it the render fails
    /// (500, or 400 when the query's values caused it).
    #[arg(long, default_value_t = galleon_template::DEFAULT_MAX_MEMORY, value_name = "BYTES")]
    max_template_memory: usize,
    /// Deepest nesting of partials (a template that renders a template ...).
    #[arg(long, default_value_t = galleon_template::DEFAULT_MAX_DEPTH, value_name = "N")]
    max_partial_depth: usize,
    /// Most events one `POST /streams/{id}` may carry (at most the store's own limit, 10,000).
    #[arg(long, default_value_t = galleon_eventstore_http::MAX_HTTP_APPEND_EVENTS, value_name = "N")]
    max_append_events: usize,
    /// Largest `limit=` a read of a stream or of `$all` may ask for (at most 10,000).
    #[arg(long, default_value_t = galleon_eventstore_http::MAX_HTTP_READ_LIMIT, value_name = "N")]
    max_read_limit: usize,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// The request workers' runtime: `auto` runs one worker as a current-thread runtime (no
    /// work-stealing bookkeeping: about 600 fewer instructions a request) and more as a
    /// multi-thread one; `multi-thread` always the latter.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Auto)]
    runtime: RuntimeKind,
    /// Most connections open at once; more get 503.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_BODY_BYTES, value_name = "BYTES")]
    max_body: u64,
    /// Seconds allowed to receive a request head.
    #[arg(long, default_value_t = galleon_http::DEFAULT_HEADER_READ_TIMEOUT.as_secs_f64(), value_name = "SECS")]
    header_timeout: f64,
    /// Largest request head (request line and headers), in bytes; more gets 431.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_HEAD_BYTES, value_name = "BYTES")]
    max_head_bytes: usize,
    /// Most header lines in one request; more gets 431.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_HEADERS, value_name = "N")]
    max_headers: usize,
    /// Seconds the client may take to accept one response, or one chunk of a streamed one.
    #[arg(long, default_value_t = galleon_http::DEFAULT_WRITE_TIMEOUT.as_secs_f64(), value_name = "SECS")]
    write_timeout: f64,
    /// Bytes of a streamed page, event stream or file that may wait unsent in the kernel per
    /// connection (TCP_NOTSENT_LOWAT): what a slow reader can pin; 0 leaves the kernel's default.
    #[arg(long, default_value_t = galleon_http::DEFAULT_STREAM_UNSENT_BYTES, value_name = "BYTES")]
    stream_unsent: u32,
    /// What --stream-unsent is raised to for a reader that has taken 8 MiB at over twice it per
    /// millisecond (256 MB/s at the default), so the writer's wake-ups do not leave a fast
    /// reader's socket empty; back to --stream-unsent when its pace falls under it per
    /// millisecond. At or under --stream-unsent: never raised.
    #[arg(long, default_value_t = galleon_http::DEFAULT_STREAM_UNSENT_MAX_BYTES, value_name = "BYTES")]
    stream_unsent_max: u32,
    /// Bytes of answers to pipelined requests held back to go out together in one gathered
    /// write (a response waits while the next request is already read); 0 writes each alone.
    #[arg(long, default_value_t = galleon_http::DEFAULT_PIPELINE_BATCH_BYTES, value_name = "BYTES")]
    pipeline_batch: usize,
    /// Threads that write streamed pages, event streams and large files, apart from the request
    /// workers, so a burst of downloads does not delay small requests (default: one per core);
    /// 0 writes them on the request workers.
    #[arg(long, value_name = "N")]
    bulk_writers: Option<usize>,
    /// Smallest file the bulk writers send; smaller files go out from the request worker.
    #[arg(long, default_value_t = galleon_http::DEFAULT_BULK_FILE_BYTES, value_name = "BYTES")]
    bulk_file_bytes: u64,
    /// The bulk writers' scheduling class: `normal`, or `idle` (Linux SCHED_IDLE: small requests
    /// take the core from a download at once; downloads nearly stop while the cores are busy).
    #[arg(long, default_value = "normal", value_name = "CLASS")]
    bulk_priority: galleon_offload::Priority,
    /// Seconds in-flight responses may run on after SIGINT or SIGTERM.
    #[arg(long, default_value_t = galleon_http::DEFAULT_SHUTDOWN_GRACE.as_secs_f64(), value_name = "SECS")]
    shutdown_grace: f64,
    /// Seconds allowed for a whole request body, however it trickles in.
    #[arg(long, default_value_t = galleon_http::DEFAULT_BODY_READ_TIMEOUT.as_secs_f64(), value_name = "SECS")]
    body_timeout: f64,
    /// Request-body bytes all connections together may hold at once; more get 503.
    #[arg(long, default_value_t = galleon_http::DEFAULT_MAX_BUFFERED_BODY_BYTES, value_name = "BYTES")]
    max_buffered_bodies: u64,
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
    /// Bearer token that may read, subscribe and consume (`Authorization: Bearer TOKEN`). At
    /// least 16 visible characters. With no token at all the API is open; once any token is
    /// set, a role without one takes the admin token only (see --events-open-read).
    #[arg(
        long,
        env = "GALLEON_EVENTS_READ_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    events_read_token: Option<String>,
    /// Bearer token that may append; unset while another token is set: appending takes the
    /// admin token only (see --events-open-append).
    #[arg(
        long,
        env = "GALLEON_EVENTS_APPEND_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    events_append_token: Option<String>,
    /// Bearer token that may do everything, including creating and deleting subscriptions.
    #[arg(
        long,
        env = "GALLEON_EVENTS_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    events_admin_token: Option<String>,
    /// Serve an event-store API with an open role (no token at all, or --events-open-read or
    /// --events-open-append) on a non-loopback address (refused otherwise: anyone who reaches
    /// the port could read or append).
    #[arg(long)]
    events_open: bool,
    /// Serve reading, subscribing, consuming and acknowledging without a token although other
    /// tokens are set (instead of --events-read-token). Off loopback it also needs --events-open.
    #[arg(long)]
    events_open_read: bool,
    /// Serve appending without a token although other tokens are set (instead of
    /// --events-append-token). Off loopback it also needs --events-open.
    #[arg(long)]
    events_open_append: bool,
    /// PostgreSQL only: the schema holding the event store's tables, created when missing
    /// (default: the connection's search_path, normally `public`).
    #[arg(long, value_name = "NAME")]
    events_schema: Option<String>,
    /// Seconds of silence after which `GET /all/subscribe` sends a keep-alive comment, so
    /// proxies do not cut an idle subscription.
    #[arg(long, default_value_t = galleon_eventstore_http::DEFAULT_KEEP_ALIVE.as_secs_f64(), value_name = "SECS")]
    events_keep_alive: f64,
    /// Batches of the live feed kept for subscribers that fall behind (one reader tails the
    /// store for all of them); a subscriber further behind reads the store itself.
    #[arg(long, default_value_t = galleon_eventstore::DEFAULT_SUBSCRIBER_BUFFER, value_name = "N")]
    events_subscriber_buffer: usize,
    /// Most events the live feed's one reader takes per query when it is behind (it doubles
    /// its reads from 500 up to this); 500 to 10,000.
    #[arg(long, default_value_t = galleon_eventstore::TAIL_BATCH_MAX, value_name = "N")]
    events_tail_batch: usize,
    /// Most persistent subscriptions (consumer groups included) the event store holds: creating
    /// one more is answered 409 naming this flag. At least 1.
    #[arg(long, default_value_t = galleon_eventstore::DEFAULT_MAX_SUBSCRIPTIONS, value_name = "N")]
    events_max_subscriptions: usize,
    /// PostgreSQL only: seconds a transaction (in any database of the cluster) may hold `$all`
    /// back, committed events waiting behind it, before a warning names its pid, database and
    /// age, and the stats page shows it. At least 1.
    #[arg(long, default_value_t = galleon_eventstore::DEFAULT_HELD_BACK_WARNING.as_secs(), value_name = "SECONDS")]
    events_held_back_warning: u64,
    /// SQLite only: threads (one connection each) that run the store's reads, apart from every
    /// other kind of blocking work.
    #[arg(long, default_value_t = galleon_eventstore::DEFAULT_SQLITE_READER_THREADS, value_name = "N")]
    sqlite_reader_threads: usize,
    /// Development: recompile templates when a `*.eex` file under the site changes (polled twice
    /// a second), and show a template that fails to compile on its pages (to loopback peers),
    /// while the last good version keeps serving. Without it templates reload on SIGHUP and on
    /// `POST /templates/reload` (loopback only), and a broken version never reaches a client.
    #[arg(long)]
    watch: bool,
    /// Keep statistics: requests by route, latency and write histograms, connections, served
    /// at /_galleon (a live page), /_galleon/stats.json and /metrics (Prometheus).
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    stats: bool,
    /// Log one line per request (method, path, status, bytes, µs, write calls) to stderr
    /// through `tracing` (target `galleon::access`, level info; `RUST_LOG` can also turn it on).
    #[arg(long)]
    access_log: bool,
    /// Let any peer read /_galleon, its stats.json, /metrics and /_galleon/offload, not only
    /// loopback ones (they show routes, traffic and timings). /_galleon/health is always open.
    #[arg(long)]
    diagnostics_open: bool,
    /// Bearer token the diagnostics (/_galleon, stats.json, /metrics, /_galleon/offload) and the
    /// reload routes (POST /templates/reload, /rules/reload) then require from every peer,
    /// loopback included: behind a reverse proxy on this host every client is loopback. At
    /// least 16 visible characters. /_galleon/health stays open.
    #[arg(
        long,
        env = "GALLEON_DIAGNOSTICS_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        conflicts_with = "diagnostics_open"
    )]
    diagnostics_token: Option<String>,
    /// The CPU pool (renders, stream chunks, /seal, /hash).
    #[command(flatten)]
    offload: crate::site_args::OffloadArgs,
    /// The rules example (`GET /rules/match`, reloaded while serving).
    #[command(flatten)]
    rules: crate::site_args::RulesArgs,
    /// The live pages (`/live/...`).
    #[command(flatten)]
    live: crate::live_args::LiveArgs,
    /// TechEmpower's Fortunes (`GET /fortunes`).
    #[command(flatten)]
    fortunes: crate::site_args::FortunesArgs,
}

pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("expected on or off, got `{s}`")),
    }
}

/// Longest duration any `--*-timeout` or `--events-keep-alive` takes: a day. Longer is a typo
/// (or `1e19`, which once overflowed the deadline arithmetic of every connection).
const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// Smallest `--max-head-bytes`: 1 KiB, room for a request line and a few headers.
const MIN_HEAD_BYTES: usize = 1024;

/// Largest `--max-head-bytes`: 1 MiB (nginx's largest default header buffers are 32 KiB).
const MAX_HEAD_BYTES: usize = 1024 * 1024;

/// Most `--bulk-writers`: threads beyond a few per core only add switching.
const MAX_BULK_WRITERS: usize = 1024;

/// Largest `--stream-unsent` and `--stream-unsent-max`: 64 MiB (Linux's largest send buffer by default is 4 MiB).
const MAX_STREAM_UNSENT: u32 = 64 * 1024 * 1024;

/// `--runtime`: which tokio runtime runs the request workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RuntimeKind {
    /// A current-thread runtime for one worker, a multi-thread one for more.
    Auto,
    /// A multi-thread runtime whatever the number of workers.
    MultiThread,
}

/// Largest `--pipeline-batch`: 16 MiB held per connection is already more than any pipelining
/// client needs.
const MAX_PIPELINE_BATCH: usize = 16 * 1024 * 1024;

/// Largest `--max-headers`: 1,024 header lines.
const MAX_HEADERS: usize = 1024;

/// Descriptors kept free beside the connections when `--max-connections` is fitted under the
/// open-file limit: the listener, the runtime's epoll and wake-up descriptors, standard streams,
/// static files being sent, the event store's database files or connections. A guess with room.
const FD_RESERVE: u64 = 64;

/// A duration flag in seconds: more than 0, at most [`MAX_DURATION`].
fn secs(v: f64, what: &str) -> anyhow::Result<Duration> {
    let d = Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero() && *d <= MAX_DURATION)
        .with_context(|| {
            format!(
                "--{what} must be more than 0 seconds and at most {} (got {v})",
                MAX_DURATION.as_secs()
            )
        })?;
    Ok(d)
}

/// Raises the open-file limit to its hard limit and lowers `wanted` connections to fit under it
/// (with [`FD_RESERVE`] to spare), saying so: past the limit, `accept` fails and new clients
/// would wait with no answer.
fn fit_connections(wanted: usize) -> usize {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            say!(
                "galleon: cannot read the open-file limit ({e}); keeping --max-connections {wanted}"
            );
            return wanted;
        }
    };
    let room = usize::try_from(limit.saturating_sub(FD_RESERVE))
        .unwrap_or(usize::MAX)
        .max(1);
    if wanted > room {
        say!(
            "galleon: --max-connections {wanted} lowered to {room} to fit the open-file limit of {limit} (raise it with ulimit -n)"
        );
        room
    } else {
        wanted
    }
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
    let trace_endpoint = args.trace_endpoint.unwrap_or(false);
    config.policy_header = Some(POLICY_HEADER);
    let pages = galleon_site::pages::PagesConfig {
        stream_chunk: args.chunk_bytes,
        full_body_max: args.full_body_max,
        max_whole_pages: args.max_whole_pages,
        value_copy_below: args.value_copy_below,
        limits: galleon_template::Limits {
            max_steps: args.max_template_steps,
            max_memory: args.max_template_memory,
            max_depth: args.max_partial_depth,
            ..galleon_template::Limits::default()
        },
        watch: args.watch,
    };
    pages.validate()?;
    anyhow::ensure!(
        (1..=galleon_eventstore::MAX_APPEND_EVENTS).contains(&args.max_append_events),
        "--max-append-events {}: expected 1 to {}",
        args.max_append_events,
        galleon_eventstore::MAX_APPEND_EVENTS
    );
    anyhow::ensure!(
        (1..=galleon_eventstore::MAX_READ_EVENTS).contains(&args.max_read_limit),
        "--max-read-limit {}: expected 1 to {}",
        args.max_read_limit,
        galleon_eventstore::MAX_READ_EVENTS
    );
    anyhow::ensure!(
        args.max_connections >= 1,
        "--max-connections 0: at least one connection is needed"
    );
    config.limits.max_connections = fit_connections(args.max_connections);
    config.limits.max_body_bytes = args.max_body;
    config.limits.header_read_timeout = secs(args.header_timeout, "header-timeout")?;
    config.limits.idle_timeout = secs(args.idle_timeout, "idle-timeout")?;
    config.limits.body_read_timeout = secs(args.body_timeout, "body-timeout")?;
    config.limits.write_timeout = secs(args.write_timeout, "write-timeout")?;
    config.shutdown_grace = secs(args.shutdown_grace, "shutdown-grace")?;
    anyhow::ensure!(
        (MIN_HEAD_BYTES..=MAX_HEAD_BYTES).contains(&args.max_head_bytes),
        "--max-head-bytes {}: expected {MIN_HEAD_BYTES} to {MAX_HEAD_BYTES}",
        args.max_head_bytes
    );
    anyhow::ensure!(
        (1..=MAX_HEADERS).contains(&args.max_headers),
        "--max-headers {}: expected 1 to {MAX_HEADERS}",
        args.max_headers
    );
    anyhow::ensure!(
        args.stream_unsent <= MAX_STREAM_UNSENT,
        "--stream-unsent {}: expected 0 (the kernel's default) to {MAX_STREAM_UNSENT}",
        args.stream_unsent
    );
    config.limits.stream_unsent_bytes = args.stream_unsent;
    anyhow::ensure!(
        args.stream_unsent_max <= MAX_STREAM_UNSENT,
        "--stream-unsent-max {}: expected 0 (never raised) to {MAX_STREAM_UNSENT}",
        args.stream_unsent_max
    );
    config.limits.stream_unsent_max_bytes = args.stream_unsent_max;
    anyhow::ensure!(
        args.pipeline_batch <= MAX_PIPELINE_BATCH,
        "--pipeline-batch {}: expected 0 (each answer alone) to {MAX_PIPELINE_BATCH}",
        args.pipeline_batch
    );
    config.limits.pipeline_batch_bytes = args.pipeline_batch;
    let bulk_writers = args
        .bulk_writers
        .unwrap_or_else(galleon_http::default_bulk_writers);
    anyhow::ensure!(
        bulk_writers <= MAX_BULK_WRITERS,
        "--bulk-writers {bulk_writers}: expected 0 (write on the request workers) to {MAX_BULK_WRITERS}"
    );
    config.bulk_writers = bulk_writers;
    config.bulk_file_bytes = args.bulk_file_bytes;
    config.bulk_priority = args.bulk_priority;
    config.limits.max_head_bytes = args.max_head_bytes;
    config.limits.max_headers = args.max_headers;
    config.limits.max_buffered_body_bytes = args.max_buffered_bodies;
    let access = galleon_eventstore_http::Access {
        read: args.events_read_token.clone(),
        append: args.events_append_token.clone(),
        admin: args.events_admin_token.clone(),
        open: galleon_eventstore_http::OpenRoles {
            read: args.events_open_read,
            append: args.events_open_append,
        },
    };
    access.validate().map_err(|e| {
        if e.opened {
            anyhow::anyhow!(
                "--events-open-{role} and --events-{role}-token: an opened role takes no token; \
                 drop one of them",
                role = e.role
            )
        } else {
            anyhow::anyhow!("--events-{}-token: {}", e.role, e.rule())
        }
    })?;
    if args.events != crate::events::EVENTS_OFF && access.is_open() {
        anyhow::ensure!(
            args.addr.ip().is_loopback() || args.events_open,
            "--addr {} is not loopback and the event-store API has no token: anyone who reaches \
             the port could append. Set --events-admin-token (and --events-read-token, \
             --events-append-token), pass --events-open if that is meant, or --events off",
            args.addr
        );
    }
    if args.events != crate::events::EVENTS_OFF && !access.is_open() && access.any_open() {
        let opened: Vec<&str> = [
            (access.open.read, "--events-open-read"),
            (access.open.append, "--events-open-append"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
        anyhow::ensure!(
            args.addr.ip().is_loopback() || args.events_open,
            "--addr {} is not loopback and {} leaves the event-store API partly open ({}): \
             anyone who reaches the port could use those roles without a token. Pass \
             --events-open if that is meant, or set a token instead",
            args.addr,
            opened.join(" and "),
            access.describe()
        );
    }
    let events = crate::events::EventsConfig {
        url: args.events.clone(),
        schema: args.events_schema.clone(),
        keep_alive: secs(args.events_keep_alive, "events-keep-alive")?,
        subscriber_buffer: args.events_subscriber_buffer,
        tail_batch: args.events_tail_batch,
        sqlite_reader_threads: args.sqlite_reader_threads,
        max_subscriptions: args.events_max_subscriptions,
        held_back_warning: std::time::Duration::from_secs(args.events_held_back_warning),
    };
    anyhow::ensure!(
        args.events_held_back_warning >= 1,
        "--events-held-back-warning 0: expected at least 1 second"
    );
    anyhow::ensure!(
        events.max_subscriptions >= 1,
        "--events-max-subscriptions 0: expected at least 1"
    );
    anyhow::ensure!(
        (galleon_eventstore::SUBSCRIPTION_BATCH..=galleon_eventstore::MAX_READ_EVENTS)
            .contains(&events.tail_batch),
        "--events-tail-batch {}: expected {} to {} events",
        events.tail_batch,
        galleon_eventstore::SUBSCRIPTION_BATCH,
        galleon_eventstore::MAX_READ_EVENTS
    );
    anyhow::ensure!(
        (1..=galleon_eventstore::MAX_SQLITE_READER_THREADS).contains(&events.sqlite_reader_threads),
        "--sqlite-reader-threads {}: expected 1 to {}",
        events.sqlite_reader_threads,
        galleon_eventstore::MAX_SQLITE_READER_THREADS
    );
    anyhow::ensure!(
        (1..=galleon_eventstore::MAX_SUBSCRIBER_BUFFER).contains(&events.subscriber_buffer),
        "--events-subscriber-buffer {}: expected 1 to {}",
        events.subscriber_buffer,
        galleon_eventstore::MAX_SUBSCRIBER_BUFFER
    );
    anyhow::ensure!(
        !events.keep_alive.is_zero(),
        "--events-keep-alive must be more than 0 seconds"
    );
    // Warnings and errors (a failing event store, a broken stream) go to stderr, and the access
    // log when asked for; RUST_LOG overrides.
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    if args.access_log {
        filter = filter.add_directive(
            format!("{}=info", galleon_stats::ACCESS_TARGET)
                .parse()
                .expect("a valid directive"),
        );
    }
    // Colours only on a terminal: a log file or a pipe gets plain text.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
    let stats = std::sync::Arc::new(galleon_stats::Stats::new(galleon_stats::StatsConfig {
        record: args.stats,
        access_log: args.access_log,
    }));

    let mut diagnostics_guard = galleon_http::Guard::default().open(args.diagnostics_open);
    if let Some(token) = &args.diagnostics_token {
        diagnostics_guard = diagnostics_guard
            .with_token(token)
            .map_err(|e| anyhow::anyhow!("--diagnostics-token: {e}"))?;
    }
    let workers = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let site_config = galleon_site::SiteConfig {
        dir: args.site.clone(),
        pages,
        offload: args.offload.config(),
        rules: args.rules.config(),
        bulk_writers,
        diagnostics: diagnostics_guard.clone(),
        reload_on_sighup: true,
        live: args.live.config()?,
        events: None,
        fortunes: args.fortunes.config(),
    };

    // One worker (`--threads 1`, or a process allowed one CPU) is the thread-per-core case: a
    // current-thread runtime does the same work without a multi-thread one's queues and wake-ups.
    let current_thread = workers <= 1 && args.runtime == RuntimeKind::Auto;
    let runtime_line = if current_thread {
        "1 worker, current-thread runtime".to_owned()
    } else {
        format!(
            "{} worker{}, multi-thread runtime",
            workers.max(1),
            if workers > 1 { "s" } else { "" }
        )
    };
    let mut rt = if current_thread {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers.max(1));
        b
    };
    rt.enable_all();
    let rt = rt.build()?;
    rt.block_on(async move {
        // In the runtime: the SIGHUP handlers are tasks on it. The guards live until the server
        // stops.
        // The store first: the site's live orders page keeps its orders there.
        let store = crate::events::open(&events).await?;
        let mut site_config = site_config;
        site_config.events = store.clone();
        let galleon_site::Site {
            router,
            cpu,
            guards: _site_guards,
            live,
            fortunes,
            ..
        } = galleon_site::Site::open(site_config)?;
        if let Some(pg) = &fortunes.postgres {
            // Served either way: /fortunes answers 503 until the database answers.
            match pg.connect_all().await {
                Ok(()) => say!("galleon: /fortunes on {}", pg.describe()),
                Err(e) => say!("galleon: /fortunes: {e} (answering 503 until it connects)"),
            }
        }
        let mut events_source = None;
        let router = match store {
            Some(store) => {
                events_source = Some(galleon_site::store_figures::source(store.clone()));
                say!(
                    "galleon: event store {} ({}), API {}",
                    galleon_eventstore_http::redact(&events.url),
                    store.backend_name(),
                    if access.is_open() {
                        "OPEN: no tokens set, anyone who reaches the address may read and append"
                            .to_owned()
                    } else if access.any_open() {
                        format!("PARTLY OPEN: {}", access.describe())
                    } else {
                        format!("behind bearer tokens: {}", access.describe())
                    }
                );
                let api = galleon_eventstore_http::EventsApi::new(store)
                    .with_keep_alive(events.keep_alive)
                    .with_limits(galleon_eventstore_http::ApiLimits {
                        max_append_events: args.max_append_events,
                        max_read_limit: args.max_read_limit,
                        max_body_bytes: args.max_body,
                    })
                    .with_access(access.clone());
                // The server ends its event streams at shutdown.
                api.mount(router)
            }
            None => router,
        };
        let mut diagnostics = galleon_stats::Diagnostics::new(&stats)
            .pool(cpu.clone())
            .guard(diagnostics_guard.clone());
        if let Some(figures) = events_source {
            diagnostics = diagnostics.figures("events", "Event store", figures);
        }
        if let Some(live) = live {
            let figures = galleon_site::live_pages::figures(live);
            diagnostics = diagnostics.figures("live", "Live pages", figures);
        }
        let router = galleon_stats::mount(router, diagnostics);
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("binding {}", args.addr))?;
        let addr = listener.local_addr()?;
        // Before the serving line: that line is the last of the start-up (tests and scripts read
        // up to it and may close the pipe).
        say!(
            "galleon: diagnostics {}, reloads {}",
            diagnostics_guard.describe(),
            diagnostics_guard.closed().describe()
        );
        say!(
            "galleon: serving {} at http://{addr}/ ({runtime_line}, write policy {:?}{}{})",
            args.site.display(),
            policy,
            if config.trace_writes {
                ", tracing writes"
            } else {
                ""
            },
            if trace_endpoint {
                ", trace endpoint on"
            } else {
                ""
            },
        );
        let server = if trace_endpoint {
            let traces = TraceStore::new();
            Server::new(traces.mount(router), config).with_traces(traces)
        } else {
            Server::new(router, config)
        };
        let server = server.with_offload(cpu.clone());
        let server = if args.stats || args.access_log {
            server.with_observer(stats)
        } else {
            server
        };
        let summary = server
            .serve(listener, async {
                shutdown_signal().await;
                say!("galleon: shutting down (in-flight responses finish first)");
            })
            .await?;
        // Queued jobs are cancelled (their connections are gone); running ones finish.
        tokio::task::spawn_blocking(move || cpu.join()).await?;
        say!(
            "galleon: stopped after {} connections ({} refused, {} aborted at shutdown)",
            summary.connections,
            summary.refused,
            summary.aborted
        );
        anyhow::Ok(())
    })
}
