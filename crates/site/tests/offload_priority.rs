//! `OffloadConfig::priority` and `nice`: the site's pool threads are in the class the config
//! names (read back from /proc, in this test binary of one test so no other pool runs), normal
//! at nice 10 by default. The flag's parsing is `galleon serve`'s test
//! (`crates/galleon/tests/offload_priority.rs`).

#![cfg(target_os = "linux")]

mod support;

use galleon_offload::Priority;

/// `SCHED_IDLE` and `SCHED_OTHER` as /proc reports them.
const SCHED_IDLE: u32 = 5;
const SCHED_OTHER: u32 = 0;

/// (policy, nice) of every thread of this process whose name starts with `prefix` (names are cut
/// to 15 bytes by the kernel: `galleon-offload-0` reads `galleon-offload`).
fn classes(prefix: &str) -> Vec<(u32, i64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !comm.starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        out.push((rest[38].parse().unwrap(), rest[16].parse().unwrap()));
    }
    out
}

/// The classes of the pool threads of the site opened with two pool threads, `tune`d; the pool
/// is joined before returning, so the next call sees its own threads only.
fn pool_classes(tune: impl FnOnce(&mut galleon_site::offload::OffloadConfig)) -> Vec<(u32, i64)> {
    let mut config = support::config(&support::site_dir());
    config.offload.threads = 2;
    tune(&mut config.offload);
    let site = galleon_site::Site::open(config).unwrap();
    let found = classes("galleon-offload");
    site.cpu.join();
    found
}

#[test]
fn the_pool_threads_take_the_class_the_config_names_normal_by_default() {
    let default = pool_classes(|_| {});
    assert_eq!(default.len(), 2, "{default:?}");
    assert!(
        default.iter().all(|&(p, n)| p == SCHED_OTHER && n >= 10),
        "{default:?}"
    );

    let idle = pool_classes(|o| o.priority = Priority::Idle);
    assert!(
        idle.len() == 2 && idle.iter().all(|&(p, _)| p == SCHED_IDLE),
        "{idle:?}"
    );

    let normal = pool_classes(|o| {
        o.priority = Priority::Normal;
        o.nice = 7;
    });
    assert_eq!(normal.len(), 2, "{normal:?}");
    assert!(
        normal.iter().all(|&(p, n)| p == SCHED_OTHER && n >= 7),
        "{normal:?}"
    );
}
