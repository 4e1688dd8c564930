//! The memory budget of a render (`Limits::max_memory`) and the depth bound on values built
//! while rendering (`MAX_VALUE_DEPTH`): the shapes of the hostile-client report.
//!
//! Before the budget, `Enum.to_list(1..30000000) |> length` took 3.46 GB in one render, twenty
//! 64 MiB `String.duplicate`s 1.26 GB, a doubling `<>` loop 3 GB before the step limit ended it;
//! each now fails with the memory-limit error before allocating, and the test process's peak
//! resident memory (`VmHWM`) stays far below those. Before the depth bound, a reduce wrapping its
//! accumulator 100,000 times aborted the process with a stack overflow when the value was
//! dropped; it now fails cleanly, on a 2 MiB thread, in every build.

use galleon_template::{Assigns, Engine, Error, ErrorKind, Limits, MAX_VALUE_DEPTH};

/// Renders `src` with `n` as `@n` on a thread with a stack of `stack` bytes.
fn render_on(stack: usize, src: &'static str, n: i64, limits: Limits) -> Result<String, Error> {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let engine = Engine::from_source("t.eex", src)?.with_limits(limits);
            let mut a = Assigns::new();
            a.insert("n", n);
            let page = engine.render("t.eex", &a)?;
            Ok(String::from_utf8(page.to_vec()).unwrap())
        })
        .unwrap()
        .join()
        .unwrap()
}

fn render(src: &'static str, n: i64) -> Result<String, Error> {
    render_on(2 * 1024 * 1024, src, n, Limits::default())
}

/// Peak resident memory of this process, in bytes (Linux), if known.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Asserts `r` is the memory-limit error, with the peak resident memory of the whole test
/// process (its tests run in parallel) under 1 GiB: without the budget these renders took
/// 1.2-3.5 GB each. The 120 s bound catches a render that never ends, not a slow one (a debug
/// build beside two CPU hogs took 6 s).
#[track_caller]
fn assert_memory_limit(r: Result<String, Error>, started: std::time::Instant) {
    let e = r.expect_err("rendered within the memory budget");
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(
        e.message().contains("memory limit") && e.message().contains("--max-template-memory"),
        "{}",
        e.message()
    );
    assert!(e.location().is_some(), "not located: {e}");
    assert!(
        started.elapsed().as_secs() < 120,
        "took {:?}",
        started.elapsed()
    );
    if let Some(peak) = peak_rss() {
        assert!(peak < 1 << 30, "peak RSS {} MiB", peak >> 20);
    }
}

#[test]
fn a_thirty_million_element_list_is_refused() {
    let t = std::time::Instant::now();
    let r = render("<%= Enum.to_list(1..@n) |> length %>", 30_000_000);
    assert_memory_limit(r, t);
}

#[test]
fn twenty_duplicates_of_64_mib_are_refused() {
    let t = std::time::Instant::now();
    let r = render(
        "<%= Enum.map(1..20, fn _ -> String.duplicate(\"x\", @n) end) |> length %>",
        64 << 20,
    );
    assert_memory_limit(r, t);
}

#[test]
fn a_doubling_concatenation_loop_is_refused() {
    let t = std::time::Instant::now();
    let r = render(
        "<%= Enum.reduce(1..@n, \"x\", fn _, acc -> acc <> acc end) |> byte_size %>",
        40,
    );
    assert_memory_limit(r, t);
}

#[test]
fn overlapping_chunks_are_refused_before_they_are_built() {
    // 100,000 elements in windows of 50,000 moved by 1: 2.5 * 10^9 element copies.
    let t = std::time::Instant::now();
    let r = render(
        "<% xs = Enum.to_list(1..@n) %><%= Enum.chunk_every(xs, div(@n, 2), 1) |> length %>",
        100_000,
    );
    assert_memory_limit(r, t);
}

#[test]
fn one_huge_duplicate_is_refused_before_it_is_allocated() {
    let t = std::time::Instant::now();
    let r = render(
        "<%= String.duplicate(\"abcd\", @n) |> byte_size %>",
        1 << 40,
    );
    assert_memory_limit(r, t);
}

#[test]
fn a_huge_list_duplicate_is_refused_before_it_is_allocated() {
    let t = std::time::Instant::now();
    let r = render("<%= List.duplicate(:x, @n) |> length %>", 1 << 40);
    assert_memory_limit(r, t);
    assert_eq!(
        render("<%= List.duplicate(:x, @n) |> length %>", 1000).unwrap(),
        "1000"
    );
}

#[test]
fn a_stream_has_the_budget_for_each_chunk() {
    let engine = Engine::from_source(
        "t.eex",
        "<%= for _ <- 1..3 do %><%= Enum.reduce(1..40, \"x\", fn _, a -> a <> a end) %><% end %>",
    )
    .unwrap();
    let e = engine
        .stream("t.eex", Assigns::new(), 1024)
        .unwrap()
        .find_map(Result::err)
        .expect("streamed within the budget");
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.message().contains("memory limit"), "{}", e.message());
}

#[test]
fn ordinary_renders_fit_and_a_smaller_budget_is_enforced() {
    let src = "<%= for row <- Enum.map(1..@n, fn i -> %{id: i, name: \"row #{i}\"} end) do %>\
               <%= row.name %>,<% end %><%= Enum.join(Enum.map(1..@n, &to_string/1), \"-\") %>\
               <%= String.duplicate(\"ab\", 1000) |> byte_size %>";
    let page = render(src, 1000).unwrap();
    assert!(page.starts_with("row 1,row 2,"), "{page}");
    assert!(page.ends_with("999-10002000"), "{page}");

    let small = Limits {
        max_memory: 4096,
        ..Limits::default()
    };
    let dup = "<%= String.duplicate(\"x\", @n) |> byte_size %>";
    assert_eq!(render_on(1 << 20, dup, 4000, small).unwrap(), "4000");
    let e = render_on(1 << 20, dup, 5000, small).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.message().contains("(4096 bytes"), "{}", e.message());
}

/// The deep shapes: each either renders or fails cleanly with a located limit error, on a
/// 2 MiB thread, and the 100,000-deep value is never built.
#[test]
fn deep_values_fail_cleanly_on_a_2_mib_thread() {
    for src in [
        "<%= length(Enum.reduce(1..@n, [], fn x, acc -> [acc] end)) %>",
        "<%= tuple_size(Enum.reduce(1..@n, {}, fn x, acc -> {acc} end)) %>",
        "<%= map_size(Enum.reduce(1..@n, %{}, fn x, acc -> %{a: acc} end)) %>",
        "<%= length(Enum.reduce(1..@n, [], fn x, acc -> [x, {acc, acc}] end)) %>",
    ] {
        let e = render(src, 100_000).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{src}: {e}");
        assert!(
            e.message()
                .contains(&format!("nested more than {MAX_VALUE_DEPTH} deep")),
            "{src}: {}",
            e.message()
        );
    }
    // Within the bound they render.
    assert_eq!(
        render(
            "<%= length(Enum.reduce(1..@n, [], fn x, acc -> [acc] end)) %>",
            100
        )
        .unwrap(),
        "1"
    );
}

/// A value at the depth bound, on a small stack: dropped, compared, output, converted to a
/// string and flattened, the recursive walks over values. 256 KiB optimized; 2 MiB, a reload
/// thread's, unoptimized (where comparing costs about 600 bytes of stack a level, measured).
#[test]
fn values_at_the_depth_bound_fit_a_small_stack() {
    let stack = if cfg!(debug_assertions) {
        2 * 1024 * 1024
    } else {
        256 * 1024
    };
    let n = MAX_VALUE_DEPTH as i64 - 1;
    let src = "<% v = Enum.reduce(1..@n, [\"x\"], fn _, acc -> [acc] end) %>\
               <%= v == v %> <%= v %> <%= \"#{v}\" %> <%= length(List.flatten(v)) %> \
               <%= length(Enum.sort([v, v])) %> <%= length(Enum.uniq([v, v])) %>";
    let page = render_on(stack, src, n, Limits::default()).unwrap();
    assert_eq!(page, "true x x 1 2 1");
    let maps = "<% v = Enum.reduce(1..@n, %{}, fn _, acc -> %{a: acc} end) %><%= v == v %>";
    assert_eq!(
        render_on(stack, maps, n, Limits::default()).unwrap(),
        "true"
    );
}

/// A list sharing its sublists, flattened or converted to a string: exponentially many
/// elements, stopped by the budget.
#[test]
fn shared_sublists_expand_within_the_budget() {
    let t = std::time::Instant::now();
    let r = render(
        "<%= Enum.reduce(1..@n, [\"x\"], fn _, a -> [a, a] end) |> List.flatten |> length %>",
        60,
    );
    assert_memory_limit(r, t);
    let t = std::time::Instant::now();
    let r = render(
        "<%= byte_size(to_string(Enum.reduce(1..@n, [\"x\"], fn _, a -> [a, a] end))) %>",
        60,
    );
    assert_memory_limit(r, t);
}
