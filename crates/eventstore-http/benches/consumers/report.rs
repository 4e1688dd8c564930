//! The consumers bench's report: one table of both backends' rows with the targets and verdicts,
//! then the notes that say what limited each row.

use super::*;

/// Prints the table and the notes for `results` (SQLite, PostgreSQL; `None`: skipped).
pub(super) fn print(results: &[Option<Results>; 2], cfg: &Config, started: Instant) {
    let r = results;

    let mut lines = Vec::new();
    lines.push(line(
        format!(
            "1. fill {} events ({}/append, {FILL_TASKS} tasks), events/s",
            int(cfg.fill as f64),
            int(FILL_BATCH as f64)
        ),
        cells(r, |x| {
            format!(
                "{} ({:.1} s)",
                int(cfg.fill as f64 / x.fill.as_secs_f64()),
                x.fill.as_secs_f64()
            )
        }),
    ));
    lines.push(Line {
        target: format!(">= {}", int(CATCH_UP_TARGET)),
        verdicts: verdicts(r, |x| x.catch_sub >= CATCH_UP_TARGET),
        ..line(
            "   catch-up $all from 0, Subscription, events/s",
            cells(r, |x| int(x.catch_sub)),
        )
    });
    lines.push(line(
        format!("   catch-up $all from 0, read_all({MAX_READ_EVENTS}), events/s"),
        cells(r, |x| int(x.catch_read)),
    ));
    for (i, w) in LATENCY_WRITERS.iter().enumerate() {
        lines.push(line(
            format!("2. append -> $all subscriber, {w} writers, p50/p99 us"),
            cells(r, |x| {
                format!(
                    "{} / {}",
                    int(x.latency[i].p50_us),
                    int(x.latency[i].p99_us)
                )
            }),
        ));
        lines.push(line(
            "   (the append call itself, p50/p99 us)",
            cells(r, |x| {
                format!(
                    "{} / {}",
                    int(x.latency[i].append_p50_us),
                    int(x.latency[i].append_p99_us)
                )
            }),
        ));
        lines.push(line(
            "   (events appended = received, and per s)",
            cells(r, |x| {
                format!(
                    "{} ({})",
                    int(x.latency[i].events as f64),
                    int(x.latency[i].events_per_s)
                )
            }),
        ));
    }
    for (i, n) in SUBSCRIBER_LEVELS.iter().enumerate() {
        lines.push(line(
            format!(
                "3. appends/s, {APPEND_WRITERS} writers x 1 event, {} own-stream subs",
                int(*n as f64)
            ),
            cells(r, |x| int(x.appends[i])),
        ));
    }
    let last = SUBSCRIBER_LEVELS.len() - 1;
    lines.push(Line {
        target: format!(">= {APPEND_TARGET:.2}"),
        verdicts: verdicts(r, |x| x.appends[last] / x.appends[0] >= APPEND_TARGET),
        ..line(
            format!("   {} subs / 0 subs", int(SUBSCRIBER_LEVELS[last] as f64)),
            cells(r, |x| format!("{:.2}", x.appends[last] / x.appends[0])),
        )
    });
    lines.push(line(
        format!("4. {SSE_SUBSCRIBERS} $all subs -> sse_frame -> sockets, delivered ev/s"),
        cells(r, |x| int(x.sse.delivered)),
    ));
    lines.push(line(
        format!("   floor: ready frames -> {SSE_SUBSCRIBERS} sockets, frames/s"),
        cells(r, |x| int(x.sse.floor)),
    ));
    lines.push(Line {
        target: format!(">= {SSE_TARGET:.2}"),
        verdicts: verdicts(r, |x| x.sse.delivered / x.sse.floor >= SSE_TARGET),
        ..line(
            "   delivered / floor",
            cells(r, |x| format!("{:.2}", x.sse.delivered / x.sse.floor)),
        )
    });
    lines.push(Line {
        target: format!("< {IDLE_TARGET_PCT:.0}%"),
        verdicts: verdicts(r, |x| x.idle_pct < IDLE_TARGET_PCT),
        ..line(
            format!(
                "5. {} idle $all subs, CPU % of one core (stat)",
                int(IDLE_SUBSCRIBERS as f64)
            ),
            cells(r, |x| format!("{:.2}%", x.idle_pct)),
        )
    });
    lines.push(line(
        "   (same, threads' schedstat, ns resolution)",
        cells(r, |x| {
            x.idle_sched_pct
                .map_or_else(|| "n/a".to_owned(), |p| format!("{p:.2}%"))
        }),
    ));

    println!();
    println!(
        "galleon-eventstore consumers (issue 19): one run, tokio multi-thread runtime with 2 workers; \
         windows {:.1} s, idle {:.1} s",
        cfg.window.as_secs_f64(),
        cfg.idle.as_secs_f64()
    );
    println!(
        "{:<66} {:>17} {:>17} | {:>10} {:>7} {:>7}",
        "scenario", "sqlite", "postgres", "target", "sqlite", "pg"
    );
    for l in &lines {
        println!(
            "{:<66} {:>17} {:>17} | {:>10} {:>7} {:>7}",
            l.name, l.cells[0], l.cells[1], l.target, l.verdicts[0], l.verdicts[1]
        );
    }
    println!();
    println!(
        "targets are issue 19's for PostgreSQL; the SQLite verdicts apply the same figures for comparison"
    );
    for (name, x) in ["sqlite", "postgres"].iter().zip(r) {
        let Some(x) = x else { continue };
        let fmt_rounds = |xs: &[f64]| xs.iter().map(|v| int(*v)).collect::<Vec<_>>().join(", ");
        for (n, c) in SUBSCRIBER_LEVELS.iter().zip(&x.append_counters) {
            println!("{name}: row 3, {n} subs: {}", c.describe());
        }
        // What the live feed carried in the windows, per subscriber; its batches were full when
        // their mean size is near the tailer's largest read.
        let c = &x.sse.counters;
        let feed_max = c.events as f64 / c.secs;
        let mean_batch = c.events as f64 / c.batches.max(1) as f64;
        let per_sub = x.sse.delivered / SSE_SUBSCRIBERS as f64;
        let limit = if x.sse.delivered >= 0.95 * x.sse.wanted {
            "the subscribers kept up with the appends: the appends were the limit, delivered is a lower bound"
        } else if per_sub >= 0.9 * feed_max && mean_batch >= 0.9 * TAIL_BATCH_MAX as f64 {
            "each subscriber kept up with the live feed, whose batches were full: the fan-out's one $all reader was the limit"
        } else if per_sub >= 0.9 * feed_max {
            "each subscriber kept up with the live feed, which was not full: the appends' visibility was the limit"
        } else {
            "the subscribers were the limit"
        };
        println!(
            "{name}: row 4 appends {} events/s in the windows ({} deliveries/s wanted); per subscriber {} events/s, \
             the live feed carried {} ({} batches/s, {} events each on average, reads of <= {TAIL_BATCH_MAX}): {limit}",
            int(x.sse.offered),
            int(x.sse.wanted),
            int(per_sub),
            int(feed_max),
            int(c.batches as f64 / c.secs),
            int(mean_batch),
        );
        println!(
            "{name}: row 4 rounds: floor {}, delivered {}; {}; frames of ~{} bytes, so the floor writes {} MB/s",
            fmt_rounds(&x.sse.floors),
            fmt_rounds(&x.sse.delivered_rounds),
            x.sse.counters.describe(),
            int(x.sse.frame_bytes),
            int(x.sse.floor * x.sse.frame_bytes / 1e6)
        );
        println!(
            "{name}: row 4 per event, timed alone: RecordedEvent::clone {:.0} ns (per delivery to a Subscription), \
             sse_frame {:.0} ns (once per live event for all {SSE_SUBSCRIBERS} frame subscribers: {:.1} ns per delivery)",
            x.sse.clone_ns,
            x.sse.frame_ns,
            x.sse.frame_ns / SSE_SUBSCRIBERS as f64
        );
        let (f, d) = (x.sse.floor_cpu, x.sse.delivered_cpu);
        println!(
            "{name}: row 4 CPU per frame, ns (this process + the PostgreSQL server): floor {:.0} + {:.0}, \
             delivered {:.0} + {:.0} (floor / delivered {:.2}: the ratio the 2 cores would allow if both ran them flat out)",
            f.0,
            f.1,
            d.0,
            d.1,
            (f.0 + f.1) / (d.0 + d.1)
        );
    }
    println!(
        "row 3: EventFilter has no per-stream filter; subscriber i follows category sub{{i}} (stream sub{{i}}-x), \
         the writers append to apw{{k}}-x, so no subscriber receives an event (checked)"
    );
    println!("bench run took {:.1} s", started.elapsed().as_secs_f64());
}

/// `x` rounded, with thousands separators.
pub(super) fn int(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 { format!("-{out}") } else { out }
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "SKIPPED",
    }
}

struct Line {
    name: String,
    cells: [String; 2],
    target: String,
    verdicts: [&'static str; 2],
}

/// Cells of one row: `f` of each backend's results, or SKIPPED.
fn cells(r: &[Option<Results>; 2], f: impl Fn(&Results) -> String) -> [String; 2] {
    [0, 1].map(|i| r[i].as_ref().map_or_else(|| "SKIPPED".to_owned(), &f))
}

fn verdicts(r: &[Option<Results>; 2], f: impl Fn(&Results) -> bool) -> [&'static str; 2] {
    [0, 1].map(|i| verdict(r[i].as_ref().map(&f)))
}

fn line(name: impl Into<String>, cells: [String; 2]) -> Line {
    Line {
        name: name.into(),
        cells,
        target: String::new(),
        verdicts: ["", ""],
    }
}
