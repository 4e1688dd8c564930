//! `/live/events`: a live browser of the site's event store — the store's figures, its
//! categories and streams, one stream's latest events (`?stream=order-7`), the persistent
//! subscriptions and consumer groups with their lag, and a live tail of `$all`.
//!
//! # Design
//!
//! LiveView handlers are synchronous and the store is asynchronous, so no handler ever waits
//! for a read. There are two paths:
//!
//! - **Shared read model** (one per site): a task started by [`EventBrowser::start`]
//!   scans `$all` from 0 up to the head (at most [`MAX_SCAN_EVENTS`] events), then follows it
//!   with [`galleon_live::follow_events`] on [`Store::subscribe_all`] from that head, counting
//!   events per category and stream (at most [`MAX_STREAMS`] streams and [`MAX_CATEGORIES`]
//!   categories kept; the page says when a cap was hit) and keeping the last [`TAIL`] events.
//!   The follow callback only updates the model and wakes a notifier task, which broadcasts
//!   one "changed" message to the views' topic at most every [`COALESCE`] (a burst of appends
//!   is one diff per page, never one message per event, so no page's inbox overflows), and,
//!   while a page is open, re-reads the persistent subscriptions every [`SUBSCRIPTIONS_EVERY`].
//!   Views render from the model under its lock: no query per view.
//! - **A stream's events** are read per view: `handle_params` checks the id at once (a bad one
//!   is a message on the page) and sends the view a "read now" message on its own topic;
//!   that message arrives after the join has registered the view's subscriptions, so the
//!   read task's answer, broadcast to the same topic, cannot be lost. Each request carries a
//!   number and answers to older ones are dropped, so quick patches never show a stale
//!   stream. A new event in the shown stream (seen in the model) triggers a re-read.
//!
//! The HTTP render (before the socket joins) shows the model; a selected stream appears once
//! the page is connected.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use galleon_eventstore::{Direction, Error, RecordedEvent, Store, category_of, validate_stream_id};
use galleon_live::{Info, Live, LiveView, Socket, ViewError};
use galleon_template::Value;
use serde_json::Value as Json;
use tokio::sync::Notify;

/// Most streams the model keeps counts for; events of further streams count in their
/// category and in the totals only.
pub const MAX_STREAMS: usize = 10_000;
/// Most categories the model keeps; events of further categories count in the totals only.
pub const MAX_CATEGORIES: usize = 10_000;
/// Most events the first scan of `$all` reads; the follow goes on from the head either way.
pub const MAX_SCAN_EVENTS: u64 = 1_000_000;
/// Events in the live tail.
pub const TAIL: usize = 20;
/// Events shown of a selected stream (its latest).
pub const STREAM_EVENTS: usize = 50;
/// Categories listed on the page (by name), and streams listed per category.
pub const CATEGORIES_SHOWN: usize = 200;
/// Streams listed under each category (by name).
pub const STREAMS_SHOWN: usize = 10;
/// Most persistent subscriptions listed.
pub const SUBSCRIPTIONS_SHOWN: usize = 50;
/// A subscription's lag is counted up to this many events ("100+" beyond).
pub const LAG_CAP: usize = 100;
/// Longest event data shown, in bytes of pretty-printed JSON (cut beyond).
pub const DATA_SHOWN: usize = 4_096;
/// The notifier's window: at most one broadcast to the pages per window.
pub const COALESCE: Duration = Duration::from_millis(100);
/// How often the subscriptions are re-read (and the figures re-sent) while a page is open.
pub const SUBSCRIPTIONS_EVERY: Duration = Duration::from_secs(2);

/// The page's path.
pub const PATH: &str = "/live/events";
/// The topic every event browser page subscribes to for model changes.
const TOPIC: &str = "live-events";
/// Events per read of the first scan.
const SCAN_PAGE: usize = 1_000;

/// The event browser of one store: the shared model, made before the `Live` mount (for the
/// view factory) and started after it ([`EventBrowser::start`]).
#[derive(Debug, Clone)]
pub struct EventBrowser {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    store: Store,
    model: Mutex<Model>,
    /// Set by [`EventBrowser::start`]: where the read tasks broadcast their answers.
    live: OnceLock<Live>,
    /// Woken on each model change and on each join; the notifier task waits on it.
    changed: Notify,
    /// A page joined: re-read the subscriptions now rather than at the next tick.
    wants_subscriptions: AtomicBool,
    /// Numbers the views' own topics.
    next_view: AtomicU64,
}

impl EventBrowser {
    /// A browser of `store`; nothing runs until [`EventBrowser::start`].
    pub fn new(store: &Store) -> EventBrowser {
        EventBrowser {
            shared: Arc::new(Shared {
                store: store.clone(),
                model: Mutex::new(Model {
                    scanning: true,
                    ..Model::default()
                }),
                live: OnceLock::new(),
                changed: Notify::new(),
                wants_subscriptions: AtomicBool::new(false),
                next_view: AtomicU64::new(0),
            }),
        }
    }

    /// The view factory for `Live::builder(..).view(PATH, "events.html.eex", ..)`.
    pub fn view(&self) -> impl Fn() -> EventsView + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || EventsView {
            topic: format!(
                "{TOPIC}:view:{}",
                shared.next_view.fetch_add(1, Ordering::Relaxed)
            ),
            shared: shared.clone(),
            seq: 0,
            stream: None,
            shown_version: None,
            pending: false,
        }
    }

    /// Starts the scan, the follow and the notifier on the current tokio runtime (call once,
    /// inside it, with the built mount).
    pub fn start(&self, live: &Live) {
        if self.shared.live.set(live.clone()).is_err() {
            tracing::warn!("live events: the event browser was started twice");
            return;
        }
        tokio::spawn(scan_then_follow(self.shared.clone(), live.clone()));
        tokio::spawn(notify_pages(self.shared.clone(), live.clone()));
    }
}

impl Shared {
    fn model(&self) -> MutexGuard<'_, Model> {
        // Every change leaves the model valid: a panic elsewhere does not spoil it.
        self.model.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads `$all` up to the head into the model, then follows it from there.
async fn scan_then_follow(shared: Arc<Shared>, live: Live) {
    let store = shared.store.clone();
    let head = match store.head_position().await {
        Ok(h) => h,
        Err(e) => {
            return shared
                .model()
                .fail(format!("reading the head of $all: {e}"));
        }
    };
    let mut from = 0;
    while from < head {
        if shared.model().scanned >= MAX_SCAN_EVENTS {
            shared.model().scan_capped = true;
            break;
        }
        let page = match store.read_all(from, SCAN_PAGE).await {
            Ok(p) => p,
            Err(e) => return shared.model().fail(format!("scanning $all: {e}")),
        };
        let Some(last) = page.last() else { break };
        from = last.position + 1;
        let mut model = shared.model();
        for e in page.iter().take_while(|e| e.position < head) {
            model.apply(e);
            model.scanned += 1;
        }
        drop(model);
        shared.changed.notify_one();
    }
    {
        let mut model = shared.model();
        model.scanning = false;
        model.head = model.head.max(head);
    }
    shared.changed.notify_one();
    let model = shared.clone();
    // The pages are told by `notify_pages`, coalesced: nothing is broadcast per event.
    let follow = galleon_live::follow_events(&live, store.subscribe_all(head), TOPIC, move |e| {
        model.model().apply(e);
        model.changed.notify_one();
        None
    });
    let _ = follow.await;
    shared
        .model()
        .fail("the subscription to $all ended (see the log)".to_owned());
    shared.changed.notify_one();
}

/// Tells the open pages about model changes, one broadcast per [`COALESCE`] at most, and
/// re-reads the subscriptions while a page is open.
async fn notify_pages(shared: Arc<Shared>, live: Live) {
    let mut last_read: Option<Instant> = None;
    loop {
        let _ = tokio::time::timeout(SUBSCRIPTIONS_EVERY, shared.changed.notified()).await;
        if live.subscribers(TOPIC) == 0 {
            continue;
        }
        let wanted = shared.wants_subscriptions.swap(false, Ordering::Relaxed);
        if wanted || last_read.is_none_or(|t| t.elapsed() >= SUBSCRIPTIONS_EVERY) {
            let listed = read_subscriptions(&shared.store).await;
            shared.model().subscriptions = Some(listed);
            last_read = Some(Instant::now());
        }
        live.broadcast(TOPIC, Info::new(Changed));
        tokio::time::sleep(COALESCE).await;
    }
}

/// The persistent subscriptions as rows: checkpoint, events behind it (up to [`LAG_CAP`]),
/// and for a group its members and partitions.
async fn read_subscriptions(store: &Store) -> Result<Value, String> {
    let subs = store
        .list_subscriptions_page(None, SUBSCRIPTIONS_SHOWN)
        .await
        .map_err(|e| format!("listing the subscriptions: {e}"))?;
    let mut rows = Vec::with_capacity(subs.len());
    for s in subs {
        let lag = match store.read_filtered(s.checkpoint, LAG_CAP, &s.filter).await {
            Ok(ev) if ev.len() >= LAG_CAP => format!("{LAG_CAP}+"),
            Ok(ev) => ev.len().to_string(),
            Err(e) => format!("? ({e})"),
        };
        let category = s.filter.category_name().map(|c| format!("category {c}"));
        let types = s.filter.event_types().join(", ");
        let types = (!types.is_empty()).then(|| format!("types {types}"));
        let parts: Vec<String> = category.into_iter().chain(types).collect();
        let filter = if parts.is_empty() {
            "all events".to_owned()
        } else {
            parts.join("; ")
        };
        let (kind, members, partitions) = match &s.group {
            None => ("subscription", String::new(), String::new()),
            Some(_) => match store.group_status(&s.name).await {
                Ok(g) => {
                    let owned = g.partitions.iter().filter(|p| p.owner.is_some()).count();
                    let names: Vec<&str> = g.members.iter().map(|m| m.member.as_str()).collect();
                    let members = names.is_empty().then(|| "none".to_owned());
                    (
                        "group",
                        members.unwrap_or_else(|| names.join(", ")),
                        format!("{} ({owned} held)", g.partitions.len()),
                    )
                }
                Err(e) => ("group", format!("? ({e})"), String::new()),
            },
        };
        rows.push(Value::map([
            ("name", Value::from(s.name)),
            ("kind", Value::from(kind)),
            ("filter", Value::from(filter)),
            ("checkpoint", Value::from(s.checkpoint)),
            ("lag", Value::from(lag)),
            ("members", Value::from(members)),
            ("partitions", Value::from(partitions)),
            ("created_at", Value::from(s.created_at.to_string())),
        ]));
    }
    Ok(Value::list(rows))
}

/// The model changed (topic [`TOPIC`]).
struct Changed;
/// To a view's own topic: start read `seq` of its stream.
struct ReadNow(u64);
/// To a view's own topic: the answer to read `seq`.
struct StreamRead {
    seq: u64,
    outcome: Result<Value, String>,
}

/// What the browser knows of `$all`, bounded by the caps above.
#[derive(Debug, Default)]
struct Model {
    /// The first scan is running.
    scanning: bool,
    /// Why the scan or the follow stopped.
    failed: Option<String>,
    /// Events the first scan read.
    scanned: u64,
    /// The first scan stopped at [`MAX_SCAN_EVENTS`].
    scan_capped: bool,
    /// Events counted (scan and follow).
    events: u64,
    /// One past the last position seen (or the head the scan stopped at).
    head: u64,
    streams: HashMap<String, StreamCount>,
    /// Events of streams not kept (the stream cap was reached).
    untracked_stream_events: u64,
    categories: BTreeMap<String, CategoryCount>,
    /// Events of categories not kept (the category cap was reached).
    untracked_category_events: u64,
    /// The latest events, newest first, as rows.
    tail: VecDeque<Value>,
    /// The subscription rows, once read.
    subscriptions: Option<Result<Value, String>>,
    /// The category rows, built once per change for every view.
    cached: Option<(Value, usize)>,
}

#[derive(Debug, Clone, Copy)]
struct StreamCount {
    events: u64,
    last_version: u64,
}

#[derive(Debug, Default)]
struct CategoryCount {
    events: u64,
    streams: BTreeSet<String>,
}

impl Model {
    fn fail(&mut self, why: String) {
        tracing::error!(error = %why, "live events: the event browser stopped");
        self.failed = Some(why);
        self.scanning = false;
    }

    fn apply(&mut self, e: &RecordedEvent) {
        self.events += 1;
        self.head = self.head.max(e.position + 1);
        self.cached = None;
        let id = e.stream_id.as_str();
        let room = self.streams.len() < MAX_STREAMS;
        let new_stream = match self.streams.get_mut(id) {
            Some(s) => {
                s.events += 1;
                s.last_version = s.last_version.max(e.version);
                false
            }
            None if room => {
                let count = StreamCount {
                    events: 1,
                    last_version: e.version,
                };
                self.streams.insert(id.to_owned(), count);
                true
            }
            None => {
                self.untracked_stream_events += 1;
                false
            }
        };
        let name = category_of(id);
        if !self.categories.contains_key(name) && self.categories.len() < MAX_CATEGORIES {
            self.categories
                .insert(name.to_owned(), CategoryCount::default());
        }
        match self.categories.get_mut(name) {
            Some(c) => {
                c.events += 1;
                if new_stream {
                    c.streams.insert(id.to_owned());
                }
            }
            None => self.untracked_category_events += 1,
        }
        self.tail.push_front(tail_row(e));
        self.tail.truncate(TAIL);
    }

    /// The category rows (the first [`CATEGORIES_SHOWN`] by name) and how many more there are.
    fn categories(&mut self) -> (Value, usize) {
        if let Some(c) = &self.cached {
            return c.clone();
        }
        let rows = self
            .categories
            .iter()
            .take(CATEGORIES_SHOWN)
            .map(|(name, c)| {
                let shown = c.streams.iter().take(STREAMS_SHOWN).map(|id| {
                    let events = self.streams.get(id).map_or(0, |s| s.events);
                    Value::map([
                        ("id", Value::from(id.as_str())),
                        ("href", Value::from(stream_href(id))),
                        ("events", Value::from(events)),
                    ])
                });
                Value::map([
                    ("name", Value::from(name.as_str())),
                    ("events", Value::from(c.events)),
                    ("streams", Value::from(c.streams.len())),
                    ("shown", Value::list(shown)),
                    (
                        "more",
                        Value::from(c.streams.len().saturating_sub(STREAMS_SHOWN)),
                    ),
                ])
            });
        let built = (
            Value::list(rows),
            self.categories.len().saturating_sub(CATEGORIES_SHOWN),
        );
        self.cached = Some(built.clone());
        built
    }

    /// What the page says about the scan and the caps.
    fn notes(&self) -> Value {
        let state = match &self.failed {
            Some(why) => format!("Stopped: {why}"),
            None if self.scanning => format!("Scanning $all: {} events so far…", self.scanned),
            None => "Up to date: following $all.".to_owned(),
        };
        Value::map([
            ("state", Value::from(state)),
            ("events", Value::from(self.events)),
            ("streams", Value::from(self.streams.len())),
            ("categories", Value::from(self.categories.len())),
            ("scan_capped", Value::from(self.scan_capped)),
            (
                "untracked_streams",
                Value::from(self.untracked_stream_events),
            ),
            (
                "untracked_categories",
                Value::from(self.untracked_category_events),
            ),
        ])
    }
}

/// A tail row: position, stream (with its patch link), version, type, time.
fn tail_row(e: &RecordedEvent) -> Value {
    Value::map([
        ("position", Value::from(e.position)),
        ("stream", Value::from(e.stream_id.as_str())),
        ("href", Value::from(stream_href(&e.stream_id))),
        ("version", Value::from(e.version)),
        ("type", Value::from(e.event_type.as_str())),
        ("recorded_at", Value::from(e.recorded_at.to_string())),
    ])
}

/// A stream's event row: version, position, type, time, data pretty-printed (escaped by the
/// template, as every `<%= %>` is).
fn event_row(e: &RecordedEvent) -> Value {
    Value::map([
        ("version", Value::from(e.version)),
        ("position", Value::from(e.position)),
        ("type", Value::from(e.event_type.as_str())),
        ("recorded_at", Value::from(e.recorded_at.to_string())),
        (
            "data",
            Value::from(crate::json_text::shown(e.data.get(), DATA_SHOWN)),
        ),
        (
            "metadata",
            Value::from(crate::json_text::shown(e.metadata.get(), DATA_SHOWN)),
        ),
    ])
}

/// The page's URL for `stream`, its id percent-encoded.
fn stream_href(stream: &str) -> String {
    let mut href = format!("{PATH}?stream=");
    for b in stream.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            href.push(char::from(b));
        } else {
            href.push_str(&format!("%{b:02X}"));
        }
    }
    href
}

/// A stream id from the query, or why it is not one (said on the page as it is).
fn checked_stream(asked: Option<&Json>) -> Result<Option<String>, String> {
    let id = match asked {
        None => return Ok(None),
        Some(Json::String(s)) if s.is_empty() => return Ok(None),
        Some(Json::String(s)) => s,
        Some(_) => return Err("?stream= takes one stream id.".to_owned()),
    };
    validate_stream_id(id).map_err(|e| {
        let why = match e {
            Error::InvalidInput(why) => why,
            other => other.to_string(),
        };
        let shown: String = id.chars().take(60).collect();
        let more = if shown.len() < id.len() { "…" } else { "" };
        format!("{shown:?}{more} is not a valid stream id: {why}.")
    })?;
    Ok(Some(id.clone()))
}

/// One client's `/live/events`.
#[derive(Debug)]
pub struct EventsView {
    shared: Arc<Shared>,
    /// This view's own topic: its read requests and their answers.
    topic: String,
    /// The number of the latest stream read asked for; answers to others are dropped.
    seq: u64,
    /// The stream shown, if the query named a valid one.
    stream: Option<String>,
    /// The shown stream's last version in the model when it was last read: read again when
    /// the model has a later one.
    shown_version: Option<u64>,
    /// A read was asked for and not answered yet.
    pending: bool,
}

impl EventsView {
    /// The model's parts of the page and the store's figures.
    fn show_model(&self, s: &mut Socket) -> Option<u64> {
        let st = self.shared.store.stats();
        let mut model = self.shared.model();
        let (categories, more) = model.categories();
        s.assign("categories", categories)
            .assign("categories_more", more)
            .assign("tail", Value::list(model.tail.iter().cloned()))
            .assign("notes", model.notes())
            .assign(
                "figures",
                Value::map([
                    ("backend", Value::from(self.shared.store.backend_name())),
                    ("head", Value::from(model.head)),
                    ("watermark", Value::from(st.all_watermark)),
                    ("appends", Value::from(st.appends)),
                    ("events_appended", Value::from(st.events_appended)),
                    ("conflicts", Value::from(st.conflicts)),
                    ("subscribers", Value::from(st.subscribers)),
                    ("live_subscribers", Value::from(st.live_subscribers)),
                ]),
            );
        let (subs, note) = match &model.subscriptions {
            None => (Value::list([]), "Reading the subscriptions…".to_owned()),
            Some(Ok(rows)) => (rows.clone(), String::new()),
            Some(Err(e)) => (Value::list([]), e.clone()),
        };
        s.assign("subscriptions", subs)
            .assign("subscriptions_note", note);
        let stream = self.stream.as_deref()?;
        model.streams.get(stream).map(|c| c.last_version)
    }

    /// The shown stream's last version in the model, if it is there.
    fn model_version(&self) -> Option<u64> {
        let stream = self.stream.as_deref()?;
        self.shared
            .model()
            .streams
            .get(stream)
            .map(|c| c.last_version)
    }

    /// Asks for a new read of the shown stream (its last version in the model now: `latest`),
    /// answered on this view's topic.
    fn ask_read(&mut self, latest: Option<u64>, s: &mut Socket) {
        self.shown_version = latest;
        self.pending = true;
        self.seq += 1;
        s.broadcast(&self.topic, Info::new(ReadNow(self.seq)));
    }

    /// Starts read `seq` of the shown stream on a task; its answer comes back as [`StreamRead`].
    fn start_read(&self, seq: u64) -> Result<(), String> {
        let Some(stream) = self.stream.clone() else {
            return Ok(());
        };
        let live = self
            .shared
            .live
            .get()
            .cloned()
            .ok_or("the event browser has not started")?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "no runtime to read the stream on")?;
        let (store, topic) = (self.shared.store.clone(), self.topic.clone());
        runtime.spawn(async move {
            let read = store
                .read_stream(&stream, u64::MAX, STREAM_EVENTS, Direction::Backward)
                .await;
            let outcome = match read {
                Ok(events) if events.is_empty() => {
                    Err(format!("Stream {stream:?} has no events to show."))
                }
                Ok(events) => Ok(Value::list(events.iter().map(event_row))),
                Err(Error::StreamNotFound(_)) => Err(format!("Stream {stream:?} has no events.")),
                Err(e) => Err(format!("Reading stream {stream:?} failed: {e}")),
            };
            live.broadcast(&topic, Info::new(StreamRead { seq, outcome }));
        });
        Ok(())
    }
}

impl LiveView for EventsView {
    fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
        s.page_title("Events · galleon");
        s.assign("max_streams", MAX_STREAMS)
            .assign("max_categories", MAX_CATEGORIES)
            .assign("max_scan", MAX_SCAN_EVENTS)
            .assign("tail_size", TAIL)
            .assign("stream_events_max", STREAM_EVENTS)
            .assign("lag_cap", LAG_CAP);
        s.subscribe(TOPIC);
        s.subscribe(&self.topic);
        if s.connected() {
            self.shared
                .wants_subscriptions
                .store(true, Ordering::Relaxed);
            self.shared.changed.notify_one();
        }
        self.show_model(s);
        Ok(())
    }

    fn handle_params(&mut self, params: &Json, _: &str, s: &mut Socket) -> Result<(), ViewError> {
        self.pending = false;
        s.assign("stream_events", Value::list([]));
        match checked_stream(params.get("stream")) {
            Ok(None) => {
                self.stream = None;
                s.assign("stream", "").assign(
                    "stream_message",
                    "No stream selected: pick one above or type its id.",
                );
            }
            Err(why) => {
                self.stream = None;
                s.assign("stream", "").assign("stream_message", why);
            }
            Ok(Some(id)) => {
                let message = if s.connected() {
                    format!("Reading stream {id:?}…")
                } else {
                    format!("Stream {id:?} is shown once the page is connected.")
                };
                s.assign("stream", id.as_str())
                    .assign("stream_message", message);
                self.stream = Some(id);
                self.ask_read(self.model_version(), s);
            }
        }
        Ok(())
    }

    fn handle_event(&mut self, event: &str, value: &Json, s: &mut Socket) -> Result<(), ViewError> {
        if event != "open" {
            return Err(format!("no event {event:?} on the event browser").into());
        }
        match value["stream"].as_str().map(str::trim) {
            Some(id) if !id.is_empty() => s.push_patch(&stream_href(id)),
            _ => s.push_patch(PATH),
        }
        Ok(())
    }

    fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
        if info.downcast_ref::<Changed>().is_some() {
            let latest = self.show_model(s);
            // The shown stream grew (or appeared) since it was read: read it again.
            let behind = latest.is_some_and(|v| self.shown_version.is_none_or(|shown| v > shown));
            if behind && !self.pending {
                self.ask_read(latest, s);
            }
        } else if let Some(ReadNow(seq)) = info.downcast_ref::<ReadNow>()
            && *seq == self.seq
            && let Err(why) = self.start_read(*seq)
        {
            self.pending = false;
            s.assign("stream_message", why);
        } else if let Some(read) = info.downcast_ref::<StreamRead>()
            && read.seq == self.seq
        {
            self.pending = false;
            match &read.outcome {
                Ok(rows) => {
                    s.assign("stream_events", rows.clone())
                        .assign("stream_message", "");
                }
                Err(why) => {
                    s.assign("stream_events", Value::list([]))
                        .assign("stream_message", why.as_str());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(stream: &str, version: u64, position: u64) -> RecordedEvent {
        RecordedEvent {
            id: uuid::Uuid::nil(),
            stream_id: stream.into(),
            version,
            position,
            event_type: "Happened".into(),
            data: galleon_eventstore::Json::empty_object(),
            metadata: galleon_eventstore::Json::empty_object(),
            recorded_at: galleon_eventstore::Timestamp::default(),
        }
    }

    #[test]
    fn stream_links_are_percent_encoded_and_ids_checked() {
        assert_eq!(stream_href("order-7"), "/live/events?stream=order-7");
        assert_eq!(
            stream_href("a b&c#d/é"),
            "/live/events?stream=a%20b%26c%23d%2F%C3%A9"
        );
        let q = |v: Json| checked_stream(Some(&v));
        assert_eq!(q(Json::from("order-7")), Ok(Some("order-7".to_owned())));
        assert_eq!(
            (checked_stream(None), q(Json::from(""))),
            (Ok(None), Ok(None))
        );
        assert!(q(Json::from("$all")).unwrap_err().contains("reserved"));
        let long = q(Json::from("x".repeat(256))).unwrap_err();
        assert!(
            long.contains("256 bytes long") && long.contains('…'),
            "{long}"
        );
        assert!(
            q(serde_json::json!(["a", "b"]))
                .unwrap_err()
                .contains("one stream id")
        );
    }

    #[test]
    fn the_model_counts_within_its_caps_and_keeps_the_newest_events() {
        let mut m = Model::default();
        for i in 0..MAX_STREAMS as u64 + 5 {
            m.apply(&recorded(&format!("s-{i}"), 0, i));
        }
        m.apply(&recorded("s-0", 1, 1_000_000));
        assert_eq!(m.streams.len(), MAX_STREAMS);
        assert_eq!(m.untracked_stream_events, 5);
        assert_eq!(m.streams["s-0"].events, 2);
        assert_eq!(m.streams["s-0"].last_version, 1);
        assert_eq!(m.categories["s"].events, MAX_STREAMS as u64 + 6);
        assert_eq!(m.categories["s"].streams.len(), MAX_STREAMS);
        assert_eq!((m.events, m.head), (MAX_STREAMS as u64 + 6, 1_000_001));
        assert_eq!(m.tail.len(), TAIL);
        let Value::Map(newest) = &m.tail[0] else {
            panic!("a row")
        };
        assert!(
            newest
                .iter()
                .any(|(k, v)| k.as_str() == "position" && *v == Value::from(1_000_000u64))
        );
        let (rows, more) = m.categories();
        assert_eq!(more, 0);
        let Value::List(rows) = rows else {
            panic!("a list")
        };
        assert_eq!(rows.len(), 1);

        let mut m = Model::default();
        for i in 0..MAX_CATEGORIES as u64 + 3 {
            m.apply(&recorded(&format!("c{i}-1"), 0, i));
        }
        assert_eq!(m.categories.len(), MAX_CATEGORIES);
        assert_eq!(m.untracked_category_events, 3);
        assert_eq!(m.categories().1, MAX_CATEGORIES - CATEGORIES_SHOWN);
    }
}
