//! `galleon serve --offload-priority`: the pool threads of the running server are in the class
//! the flag names (read back from /proc), normal at nice 10 by default, and a bad value is
//! refused.

#![cfg(target_os = "linux")]

mod serve_support;

use serve_support::{ServeProcess, galleon};

/// `SCHED_IDLE` and `SCHED_OTHER` as /proc reports them.
const SCHED_IDLE: u32 = 5;
const SCHED_OTHER: u32 = 0;

/// (policy, nice) of every thread of `pid` whose name starts with `prefix` (names are cut to
/// 15 bytes by the kernel: `galleon-offload-0` reads `galleon-offload`).
fn classes(pid: u32, prefix: &str) -> Vec<(u32, i64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap();
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        out.push((rest[38].parse().unwrap(), rest[16].parse().unwrap()));
    }
    out
}

fn pool_classes(args: &[&str]) -> Vec<(u32, i64)> {
    let mut all = vec!["--events", "off", "--offload-threads", "2"];
    all.extend_from_slice(args);
    let s = ServeProcess::start(&all);
    classes(s.pid(), "galleon-offload")
}

#[test]
fn the_pool_threads_take_the_class_the_flag_names_normal_by_default() {
    let default = pool_classes(&[]);
    assert_eq!(default.len(), 2, "{default:?}");
    assert!(
        default.iter().all(|&(p, n)| p == SCHED_OTHER && n >= 10),
        "{default:?}"
    );

    let idle = pool_classes(&["--offload-priority", "idle"]);
    assert!(
        idle.len() == 2 && idle.iter().all(|&(p, _)| p == SCHED_IDLE),
        "{idle:?}"
    );

    let normal = pool_classes(&["--offload-priority", "normal", "--offload-nice", "7"]);
    assert_eq!(normal.len(), 2, "{normal:?}");
    assert!(
        normal.iter().all(|&(p, n)| p == SCHED_OTHER && n >= 7),
        "{normal:?}"
    );
}

#[test]
fn a_bad_priority_is_refused_at_start() {
    let out = galleon()
        .args(["serve", "--events", "off", "--offload-priority", "realtime"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected normal or idle"), "{err}");
}
