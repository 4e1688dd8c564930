//! galleon on its own: compile and render stages, the copy threshold, render-and-send.
//!
//! `cargo bench -p galleon-lab --bench render`. The peers are in `benches/peers.rs`
//! (`--features peers`).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use galleon_iolist::{IoWriter, WritePolicy};
use galleon_template::{Assigns, Engine};

mod common;

fn stages(c: &mut Criterion) {
    let mut g = c.benchmark_group("stages");
    g.bench_function("compile/teams", |b| {
        b.iter(|| Engine::from_source("teams.html.eex", black_box(common::TEAMS_EEX)).unwrap())
    });
    let engine = common::engine();
    let table = common::table_assigns();
    let teams = common::teams_assigns();
    g.bench_function("render-iolist/big-table", |b| {
        b.iter(|| engine.render("big-table.html.eex", &table).unwrap())
    });
    g.bench_function("render-iolist/teams", |b| {
        b.iter(|| engine.render("teams.html.eex", &teams).unwrap())
    });
    g.finish();
}

/// Render and send to loopback under several copy thresholds: which pieces are worth an iovec?
fn copy_below(c: &mut Criterion) {
    let mut g = c.benchmark_group("copy_below");
    let site = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site");
    let doom = Engine::load(&site).unwrap();
    let mut iters = Assigns::new();
    iters.insert("iters", 1000i64);
    let table = common::table_assigns();
    let engine = common::engine();
    let mut sock = common::loopback_sink();
    let mut writer = IoWriter::new(WritePolicy::default());
    for threshold in [0usize, 16, 64, 256, 1024, usize::MAX] {
        let label = if threshold == usize::MAX {
            "all".to_owned()
        } else {
            threshold.to_string()
        };
        let e = engine.clone().with_copy_below(threshold);
        let bytes = e.render("big-table.html.eex", &table).unwrap().len();
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function(BenchmarkId::new("big-table", &label), |b| {
            b.iter(|| {
                let page = e.render("big-table.html.eex", &table).unwrap();
                writer.write_all(&mut sock, &page).unwrap();
            })
        });
        let d = doom.clone().with_copy_below(threshold);
        let bytes = d.render("pages/doom.html.eex", &iters).unwrap().len();
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function(BenchmarkId::new("doom-1000", &label), |b| {
            b.iter(|| {
                let page = d.render("pages/doom.html.eex", &iters).unwrap();
                writer.write_all(&mut sock, &page).unwrap();
            })
        });
    }
    g.finish();
}

/// The serve path of a 4 KB page (`/blah?iters=10`): the render through an `Assigns` map built
/// per request, as `galleon serve` did before, against `render_with`, which asks for the one
/// assign the template uses.
fn small_page(c: &mut Criterion) {
    let mut g = c.benchmark_group("small_page");
    let site = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../site");
    let e = Engine::load(&site).unwrap().with_copy_below(64);
    let name = "pages/blah.html.eex";
    g.bench_function("blah-10/assigns-map", |b| {
        b.iter(|| {
            let mut a = Assigns::new();
            a.insert("iters", black_box(10i64));
            e.render(name, &a).unwrap()
        })
    });
    g.bench_function("blah-10/render_with", |b| {
        b.iter(|| {
            e.render_with(name, |_| Some(galleon_template::Value::Int(black_box(10))))
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, stages, copy_below, small_page);
criterion_main!(benches);
