//! The pinned-core method of the http suite: the server on one CPU, the load generator on
//! another, so neither takes the other's core (as with a client on another machine), and the
//! server's CPU per response is its own. `sched_setaffinity` through rustix (no `unsafe`); a
//! child started while the calling thread is pinned inherits that thread's mask.

use std::process::{Child, Command};

use anyhow::Context;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// How a suite places the server and its load generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The server on CPU `server`, the load generator on CPU `client`.
    Pinned { server: usize, client: usize },
    /// Both wherever the scheduler puts them, and why.
    Unpinned { why: String },
}

impl Placement {
    /// What is saved with each benchmark measured this way ([`super::measure::Benchmark::method`]).
    pub(crate) fn describe(&self) -> String {
        match self {
            Placement::Pinned { server, client } => {
                format!("server on CPU {server}, load generator on CPU {client}")
            }
            Placement::Unpinned { why } => format!("unpinned ({why})"),
        }
    }

    /// The server's CPU, when pinned.
    pub(crate) fn server(&self) -> Option<usize> {
        match self {
            Placement::Pinned { server, .. } => Some(*server),
            Placement::Unpinned { .. } => None,
        }
    }

    /// The load generator's CPU, when pinned.
    pub(crate) fn client(&self) -> Option<usize> {
        match self {
            Placement::Pinned { client, .. } => Some(*client),
            Placement::Unpinned { .. } => None,
        }
    }
}

/// The CPUs this thread may run on, in order.
pub(crate) fn allowed_cpus() -> anyhow::Result<Vec<usize>> {
    let set = sched_getaffinity(None).context("reading this thread's CPU affinity")?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// The placement for a run: the first two allowed CPUs when `want` and there are two, else
/// unpinned with the reason (`--no-pin`, or fewer than 2 CPUs).
pub(crate) fn plan(want: bool, allowed: &[usize]) -> Placement {
    match (want, allowed) {
        (false, _) => Placement::Unpinned {
            why: "--no-pin".to_owned(),
        },
        (true, [server, client, ..]) => Placement::Pinned {
            server: *server,
            client: *client,
        },
        (true, _) => Placement::Unpinned {
            why: format!(
                "only {} CPU{} available",
                allowed.len(),
                if allowed.len() == 1 { "" } else { "s" }
            ),
        },
    }
}

/// This thread pinned to one CPU until dropped; its former mask then restored.
pub(crate) struct ThreadPin {
    before: CpuSet,
}

impl ThreadPin {
    /// Pins the calling thread to `cpu`.
    pub(crate) fn new(cpu: usize) -> anyhow::Result<ThreadPin> {
        if cpu >= CpuSet::MAX_CPU {
            anyhow::bail!(
                "CPU {cpu} is beyond the {} a CPU set holds",
                CpuSet::MAX_CPU
            );
        }
        let before = sched_getaffinity(None).context("reading this thread's CPU affinity")?;
        let mut only = CpuSet::new();
        only.set(cpu);
        sched_setaffinity(None, &only).with_context(|| format!("pinning a thread to CPU {cpu}"))?;
        Ok(ThreadPin { before })
    }
}

impl Drop for ThreadPin {
    fn drop(&mut self) {
        let _ = sched_setaffinity(None, &self.before);
    }
}

/// Spawns `cmd` pinned to `cpu` (inherited from this thread, pinned around the spawn), or
/// wherever the scheduler puts it for `None`.
pub(crate) fn spawn_on(cmd: &mut Command, cpu: Option<usize>) -> anyhow::Result<Child> {
    let _pin = cpu.map(ThreadPin::new).transpose()?;
    Ok(cmd.spawn()?)
}

/// The CPUs process `pid` may run on, from `Cpus_allowed_list` of `/proc/PID/status`
/// (`0`, `0-3`, `0,2-3`).
pub(crate) fn cpus_of(pid: u32) -> anyhow::Result<Vec<usize>> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .with_context(|| format!("no Cpus_allowed_list in {path}"))?;
    parse_cpu_list(list.trim())
}

/// `0,2-3` as `[0, 2, 3]`.
fn parse_cpu_list(list: &str) -> anyhow::Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list {list:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().with_context(bad)?, b.parse().with_context(bad)?);
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().with_context(bad)?),
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    #[test]
    fn two_cpus_pin_and_fewer_or_no_pin_say_why_not() {
        assert_eq!(
            plan(true, &[2, 5, 7]),
            Placement::Pinned {
                server: 2,
                client: 5
            }
        );
        let one = plan(true, &[0]);
        assert_eq!(one.describe(), "unpinned (only 1 CPU available)");
        assert_eq!(one.server(), None);
        assert_eq!(plan(false, &[0, 1]).describe(), "unpinned (--no-pin)");
        assert_eq!(
            plan(true, &[0, 1]).describe(),
            "server on CPU 0, load generator on CPU 1"
        );
    }

    #[test]
    fn cpu_lists_parse_and_bad_ones_are_errors() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(parse_cpu_list("0-x").is_err());
    }

    #[test]
    fn a_child_spawned_on_a_cpu_runs_only_there_and_the_thread_gets_its_mask_back() {
        let before = allowed_cpus().unwrap();
        let cpu = *before.last().unwrap();
        let mut child = spawn_on(
            Command::new("sleep").arg("5").stdout(Stdio::null()),
            Some(cpu),
        )
        .unwrap();
        let child_cpus = cpus_of(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(child_cpus.unwrap(), vec![cpu]);
        assert_eq!(allowed_cpus().unwrap(), before);
    }

    #[test]
    fn a_pinned_thread_runs_only_on_its_cpu_until_the_pin_is_dropped() {
        // On a thread of its own, so a failure cannot leave the test harness's thread pinned.
        std::thread::spawn(|| {
            let before = allowed_cpus().unwrap();
            let cpu = before[0];
            {
                let _pin = ThreadPin::new(cpu).unwrap();
                assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
            }
            assert_eq!(allowed_cpus().unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_to_a_cpu_that_does_not_exist_is_an_error() {
        std::thread::spawn(|| {
            let missing = (0..CpuSet::MAX_CPU)
                .rev()
                .find(|c| !allowed_cpus().unwrap().contains(c))
                .unwrap();
            assert!(ThreadPin::new(missing).is_err());
        })
        .join()
        .unwrap();
    }
}
