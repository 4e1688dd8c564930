//! Server configuration: the limits every connection obeys and the default write policy.

use std::time::Duration;

use galleon_iolist::WritePolicy;
use galleon_offload::Priority;

/// Default [`Limits::max_head_bytes`]: 16 KiB. nginx answers 431 past 8 KiB per header line
/// (`large_client_header_buffers 4 8k`); 16 KiB for the whole block leaves room for big cookies
/// while keeping a slow-drip attacker's buffer small.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 16 * 1024;

/// Default [`Limits::max_headers`]: 64 header lines. hyper allows 100; real browsers send under 20.
pub const DEFAULT_MAX_HEADERS: usize = 64;

/// Default [`Limits::max_body_bytes`]: 8 MiB, enough for any event-store append batch we expect;
/// larger uploads are refused with 413 before a byte of the body is read.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 8 * 1024 * 1024;

/// Default [`Limits::header_read_timeout`]: 10 s from a request's first byte (or a connection's
/// opening) to its complete head. hyper's `header_read_timeout` defaults to 30 s; 10 s is still
/// generous on loopback and cuts slowloris connections three times sooner.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default [`Limits::body_read_timeout`]: 60 s for a whole request body, however it trickles in
/// (each read may also stall for at most the head timeout). An 8 MiB body (the default limit)
/// needs 140 KB/s to make it; a client that drips a byte at a time no longer holds its buffer
/// for ever.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Default [`Limits::max_buffered_body_bytes`]: 256 MiB of request bodies held at once by all
/// connections together. Without it, 4,096 connections could each hold an 8 MiB body (32 GiB).
pub const DEFAULT_MAX_BUFFERED_BODY_BYTES: u64 = 256 * 1024 * 1024;

/// Default [`Limits::idle_timeout`]: 60 s between a response and the next request's first byte,
/// near nginx's `keepalive_timeout 75s`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default [`Limits::write_timeout`]: 60 s for the socket to accept one response (or one chunk of
/// a stream). A client that stops reading is dropped after this instead of pinning its task.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default [`Limits::max_connections`]: 4096 open connections. Each costs a task plus its read
/// buffer (about 8 KiB); the default `ulimit -n` of 1024 on many systems is the tighter bound.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Default [`Limits::stream_unsent_bytes`]: 128 KiB. Without a bound Linux lets a socket's send
/// buffer grow to 4 MiB (`tcp_wmem`), so each slow reader of a stream or file held megabytes of
/// kernel memory, and 1,000 of them pushed loopback TCP to its memory limit.
pub const DEFAULT_STREAM_UNSENT_BYTES: u32 = 128 * 1024;

/// Default [`Limits::stream_unsent_max_bytes`]: 4 MiB, Linux's largest send buffer by default
/// (`tcp_wmem`), for readers that drain their socket fast.
pub const DEFAULT_STREAM_UNSENT_MAX_BYTES: u32 = 4 * 1024 * 1024;

/// Default [`Limits::pipeline_batch_bytes`]: 128 KiB, sixteen pipelined 4 KB pages and their
/// heads in one write (wrk's and TechEmpower's pipelining depth), and at most that much held per
/// connection beyond the response being written.
pub const DEFAULT_PIPELINE_BATCH_BYTES: usize = 128 * 1024;

/// Default [`ServerConfig::bulk_file_bytes`]: 256 KiB. Handing a response to the bulk writers
/// and back costs two task wake-ups across threads; a file this big costs ten times that to copy
/// into the socket, so smaller ones are sent by the request worker at once.
pub const DEFAULT_BULK_FILE_BYTES: u64 = 256 * 1024;

/// Default [`ServerConfig::bulk_writers`]: one thread per core (at least one).
pub fn default_bulk_writers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Default [`ServerConfig::shutdown_grace`]: in-flight responses get 30 s to finish after
/// SIGINT/SIGTERM (systemd's default `TimeoutStopSec` is 90 s; Kubernetes gives 30 s).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// What a connection may ask of the server before it is refused.
///
/// Every limit answers with a status and closes the connection: head over `max_head_bytes` or
/// more than `max_headers` lines → 431; a body over `max_body_bytes` → 413; a head not complete
/// within `header_read_timeout` → 408; no new request within `idle_timeout` → closed silently;
/// more than `max_connections` at once → 503 for the newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest request head (request line and headers) in bytes.
    pub max_head_bytes: usize,
    /// Most header lines in one request.
    pub max_headers: usize,
    /// Largest request body in bytes, `Content-Length` or chunked.
    pub max_body_bytes: u64,
    /// Time allowed from the first byte of a request head (or the connection's opening) to its
    /// end; also the most a body read may stall.
    pub header_read_timeout: Duration,
    /// Time allowed for a whole request body, from its first byte.
    pub body_read_timeout: Duration,
    /// Request bodies all connections together may hold at once; a body that does not fit is
    /// refused with 503 before it is read (a chunked one as soon as it outgrows the room left).
    pub max_buffered_body_bytes: u64,
    /// Time a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Time the socket may take to accept one response or one chunk of a stream.
    pub write_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Most bytes of a streamed body or a file that may wait unsent in the kernel per
    /// connection (Linux `TCP_NOTSENT_LOWAT`, set when such a response starts); the stream
    /// waits for the client past it. It bounds what a slow reader pins without limiting what is
    /// in flight, so fast downloads over long links keep their speed. 0 leaves the kernel's
    /// default. Whole responses are not affected: they go out in one `writev`.
    pub stream_unsent_bytes: u32,
    /// What [`stream_unsent_bytes`](Self::stream_unsent_bytes) is raised to for a reader that
    /// has taken 8 MiB at over twice it per millisecond (256 MB/s at the default), so the
    /// writer's wake-ups do not leave a fast reader's socket empty; a reader whose pace falls
    /// under it per millisecond is put back to it. At or under it: never raised.
    pub stream_unsent_max_bytes: u32,
    /// Most bytes of whole responses to pipelined requests held back to go out together in one
    /// gathered write: a response waits while the read buffer holds the next request, and the
    /// batch goes out when no complete request is left or it reaches this many bytes (or the
    /// write policy's iovec limit). 0 writes every response on its own.
    pub pipeline_batch_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_buffered_body_bytes: DEFAULT_MAX_BUFFERED_BODY_BYTES,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            stream_unsent_bytes: DEFAULT_STREAM_UNSENT_BYTES,
            stream_unsent_max_bytes: DEFAULT_STREAM_UNSENT_MAX_BYTES,
            pipeline_batch_bytes: DEFAULT_PIPELINE_BATCH_BYTES,
        }
    }
}

/// Everything a [`Server`](crate::Server) is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Request limits and timeouts.
    pub limits: Limits,
    /// Write policy for responses that do not set their own.
    pub write_policy: WritePolicy,
    /// Log every write call and its segments to stderr (`--trace-writes`).
    pub trace_writes: bool,
    /// A request header whose value (`default`, `flatten`, `vectored`, see
    /// [`WritePolicy`]'s `FromStr`) picks the write policy of that request's response, over the
    /// handler's and the server's: how `bench/http.sh` compares policies on one server. `None`
    /// (the default): requests cannot choose.
    pub policy_header: Option<&'static str>,
    /// How long in-flight responses may run after shutdown begins.
    pub shutdown_grace: Duration,
    /// Threads that write streamed bodies (rendered pages, event streams) and files of at least
    /// [`bulk_file_bytes`](Self::bulk_file_bytes), apart from the request workers; 0 writes
    /// everything on the request workers. A burst of big downloads then costs their own threads'
    /// time: a small request waits for its worker, not behind every download's kernel copies
    /// (tokio runs a worker's ready tasks in turn). The connection comes back to the request
    /// workers after the response.
    pub bulk_writers: usize,
    /// Smallest file the bulk writers send; smaller ones go out from the request worker.
    pub bulk_file_bytes: u64,
    /// The bulk writers' scheduling class. [`Priority::Idle`] (Linux `SCHED_IDLE`) lets a
    /// request worker (or any normal thread) that wakes take the core from a bulk writer at
    /// once, where under `Normal` it may wait out the writer's time slice (a few ms); the cost
    /// is that downloads nearly stop while normal threads keep every core busy.
    pub bulk_priority: Priority,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            write_policy: WritePolicy::default(),
            trace_writes: false,
            policy_header: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            bulk_writers: default_bulk_writers(),
            bulk_file_bytes: DEFAULT_BULK_FILE_BYTES,
            bulk_priority: Priority::Normal,
        }
    }
}
