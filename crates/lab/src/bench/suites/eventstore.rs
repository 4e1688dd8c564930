//! `eventstore`: the event store's three everyday operations, one at a time, on SQLite (a fresh
//! file in a temporary directory, removed after) and, when `DATABASE_URL` names one, PostgreSQL
//! (schema `galleon_bench`, created when missing; each run writes its own streams): an append of
//! 10 events (~200 bytes of data each), a read of a 100-event stream, and a subscription's
//! catch-up over 1,000 stored events. Without `DATABASE_URL` the PostgreSQL rows are listed as
//! skipped. The append figure includes the commit's flush to disk (`synchronous=FULL`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use futures::StreamExt;
use galleon_eventstore::{Direction, EventData, EventFilter, ExpectedVersion, OpenOptions, Store};

use crate::bench::measure::{Collector, Ctx, rotation};

/// Events per append.
const APPEND_EVENTS: usize = 10;
/// Events in the stream that is read.
const READ_EVENTS: usize = 100;
/// Events a subscription catches up over.
const CATCH_UP_EVENTS: usize = 1_000;
/// How long one catch-up may take before the suite fails.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);
/// The PostgreSQL schema the suite writes to.
const PG_SCHEMA: &str = "galleon_bench";

/// The three operations, in table order.
const OPS: [(&str, &str); 3] = [
    ("append 10 events", "ms/append"),
    ("read 100 events of a stream", "ms/read"),
    ("catch-up over 1,000 events", "ms"),
];

/// One event of about 200 bytes of data.
fn event(i: usize) -> anyhow::Result<EventData> {
    let data = serde_json::json!({
        "index": i,
        "name": "a product with a reasonably long descriptive name",
        "description": "some free text that pads the payload out to about two hundred bytes",
        "price_cents": 1999,
        "currency": "EUR",
    });
    Ok(EventData::json("ProductAdded", &data)?)
}

fn events(n: usize) -> anyhow::Result<Vec<EventData>> {
    (0..n).map(event).collect()
}

/// A backend under test and the streams it was prepared with.
struct Backend {
    name: &'static str,
    store: Store,
    /// Unique per run: streams of this run are `{tag}...`.
    tag: String,
    /// Where the catch-up events start.
    catch_up_from: u64,
    /// Appends made so far (each to its own stream).
    appends: usize,
}

impl Backend {
    /// Opens `url` and stores what the reads and the catch-up need.
    async fn open(name: &'static str, url: &str, options: OpenOptions) -> anyhow::Result<Backend> {
        let store = Store::open_with(url, options)
            .await
            .with_context(|| format!("opening the {name} store"))?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tag = format!("bench{}x{nanos}", std::process::id());
        store
            .append(
                &format!("{tag}read-0"),
                ExpectedVersion::NoStream,
                events(READ_EVENTS)?,
            )
            .await?;
        let catch_up_from = store.head_position().await?;
        for i in 0..CATCH_UP_EVENTS / 100 {
            store
                .append(
                    &format!("{tag}cu-{i}"),
                    ExpectedVersion::NoStream,
                    events(100)?,
                )
                .await?;
        }
        Ok(Backend {
            name,
            store,
            tag,
            catch_up_from,
            appends: 0,
        })
    }

    /// `n` appends of 10 events, each to a new stream: ms per append.
    async fn append(&mut self, n: usize) -> anyhow::Result<f64> {
        let batches = (0..n)
            .map(|_| events(APPEND_EVENTS))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let t = Instant::now();
        for batch in batches {
            self.appends += 1;
            let stream = format!("{}append-{}", self.tag, self.appends);
            self.store
                .append(&stream, ExpectedVersion::NoStream, batch)
                .await?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / n as f64)
    }

    /// `n` reads of the 100-event stream: ms per read.
    async fn read(&self, n: usize) -> anyhow::Result<f64> {
        let stream = format!("{}read-0", self.tag);
        let t = Instant::now();
        for _ in 0..n {
            let got = self
                .store
                .read_stream(&stream, 0, READ_EVENTS, Direction::Forward)
                .await?;
            if got.len() != READ_EVENTS {
                bail!("read {} events, expected {READ_EVENTS}", got.len());
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / n as f64)
    }

    /// A subscription to this run's catch-up category from its first event, until it has
    /// delivered all of them: ms.
    async fn catch_up(&self) -> anyhow::Result<f64> {
        let filter = EventFilter::category(format!("{}cu", self.tag))?;
        let t = Instant::now();
        let mut sub = self.store.subscribe(self.catch_up_from, filter);
        let mut seen = 0;
        let deadline = tokio::time::Instant::now() + CATCH_UP_TIMEOUT;
        while seen < CATCH_UP_EVENTS {
            match tokio::time::timeout_at(deadline, sub.next()).await {
                Ok(Some(Ok(_))) => seen += 1,
                Ok(Some(Err(e))) => return Err(e.into()),
                Ok(None) => bail!("the subscription ended after {seen} events"),
                Err(_) => {
                    bail!("catch-up: {seen} of {CATCH_UP_EVENTS} events in {CATCH_UP_TIMEOUT:?}")
                }
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }
}

/// Runs the suite.
pub(super) fn run(ctx: &Ctx, out: &mut Collector) -> anyhow::Result<()> {
    let rounds = ctx.rounds(11);
    let appends = ctx.pick(40, 4);
    let reads = ctx.pick(200, 10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let sqlite_url = format!("sqlite:{}", dir.path().join("events.db").display());
    let pg_url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let mut backends =
        vec![rt.block_on(Backend::open("sqlite", &sqlite_url, OpenOptions::default()))?];
    match &pg_url {
        Some(url) => {
            let options = OpenOptions {
                pg_schema: Some(PG_SCHEMA.to_owned()),
                pg_application_name: Some("galleon-bench".to_owned()),
                ..OpenOptions::default()
            };
            // A PostgreSQL that cannot be used is a skipped row, not a failed run.
            match rt.block_on(Backend::open("postgres", url, options)) {
                Ok(b) => backends.push(b),
                Err(e) => {
                    let reason = format!("PostgreSQL (DATABASE_URL) not usable: {e:#}");
                    for (op, _) in OPS {
                        out.skip(&format!("postgres: {op}"), &reason);
                    }
                }
            }
        }
        None => {
            for (op, _) in OPS {
                out.skip(&format!("postgres: {op}"), "DATABASE_URL is not set");
            }
        }
    }
    let contenders: Vec<(usize, usize)> = (0..backends.len())
        .flat_map(|b| (0..OPS.len()).map(move |o| (b, o)))
        .collect();
    for &(b, o) in &contenders {
        out.declare(
            &format!("{}: {}", backends[b].name, OPS[o].0),
            OPS[o].1,
            true,
        );
    }
    ctx.start((rounds + 1) * contenders.len(), "event store");
    // Round 0 warms up (statements prepared, pages cached) and is not kept.
    for round in 0..=rounds {
        for i in rotation(round, contenders.len()) {
            let (b, o) = contenders[i];
            let backend = &mut backends[b];
            let v = rt.block_on(async {
                match o {
                    0 => backend.append(appends).await,
                    1 => backend.read(reads).await,
                    _ => backend.catch_up().await,
                }
            });
            let name = format!("{}: {}", backend.name, OPS[o].0);
            let v = v.with_context(|| name.clone())?;
            if round > 0 {
                out.push(&name, OPS[o].1, true, v);
            }
            ctx.step(&name);
        }
    }
    drop(backends);
    drop(rt);
    drop(dir);
    Ok(())
}
