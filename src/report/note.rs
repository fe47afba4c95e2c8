//! The shield's notes ([`Note`]) as the sentences people read.

use crate::cpulist::CpuSet;
use crate::guard::kernel::{Protection, Starvable};
use crate::guard::Settings;
use crate::shield::Note;

/// The sentence of note `n`, as shown after `note:` in `on`'s and
/// `status`'s reports.
pub fn text(n: &Note) -> String {
    match n {
        Note::MountingCgroup2 { mount } => format!(
            "no cgroup hierarchy with cpuset is mounted: mounting cgroup2 at /{mount} (off unmounts it)"
        ),
        Note::AlsoIsolatedAtBoot { cpus } => format!(
            "CPUs {cpus} are also isolated at boot (isolcpus=domain): the kernel already keeps them out of load balancing; the partition adds enforcement"
        ),
        Note::SplitSiblings { groups } => format!(
            "hyper-thread siblings split ({}): the unshielded siblings share a core with the shield; keep them idle",
            join(groups.iter().map(CpuSet::to_string), "; ")
        ),
        Note::ShieldChangedInPlace { from, to } => format!(
            "shield changed in place from CPUs {from} to {to}: the shield stayed up throughout"
        ),
        Note::TunedPins { profile, pins } => format!(
            "tuned profile '{profile}' pins CPUs or IRQs ({}): it may move threads and IRQs back onto the shield when it re-applies; use a profile without isolated_cores/banned_cpus (tuned-adm profile ...) while cpushield shields",
            pins.join(", ")
        ),
        Note::TunedOverlaps {
            profile,
            chain,
            settings,
        } => format!(
            "tuned profile '{profile}' (read through {}) sets what cpushield sets too: {}; where you ask cpushield for the same, let one of them own it (drop the key from the profile, or the knob from --tune): off puts back the value from before the shield and tuned re-applies its own",
            chain.join(", "),
            settings.join("; ")
        ),
        Note::KernelWork { protection } => protection_text(protection),
        Note::StalldRunning { .. } => kernel_work_text(n),
        Note::Part(note) => note.text.clone(),
    }
}

/// The notes about the shielded CPUs' kernel threads and a stalld already
/// running: what runs them beside the user's real-time task.
fn kernel_work_text(n: &Note) -> String {
    match n {
        Note::StalldRunning {
            stalld,
            covers,
            guard,
        } => format!(
            "stalld already runs (pid {}{}, starving after {} s{}): {}; {}",
            stalld.pid,
            stalld
                .unit
                .as_deref()
                .map(|u| format!(", {}", crate::input::brief(u)))
                .unwrap_or_default(),
            stalld.threshold_s,
            if stalld.log_only { ", log only" } else { "" },
            if *covers {
                "it watches the shielded CPUs too".to_string()
            } else {
                "it does not watch every shielded CPU (its -c leaves some out, or it only logs)"
                    .to_string()
            },
            if *guard {
                "cpushield starts no second stalld: the guard's own loop watches the shield beside it, boosting after its threshold, since a loop on the shield starves RCU in less than stalld's default 60 s (the kernel warns of an RCU stall after 21 s, and stat_refresh was still waiting after 30 s behind stalld's defaults in the test guests)"
            } else {
                "the kernel protects the shield's kernel work here, so the guard does not run"
            }
        ),
        _ => unreachable!("kernel_work_text is given its own notes only"),
    }
}

/// What protects the shielded CPUs' kernel work, and what it costs.
pub fn protection_text(p: &Protection) -> String {
    let guard = |s: &Settings| {
        if s.engine == crate::guard::Engine::Stalld {
            let p = crate::guard::stalld::Params::of(s);
            return format!(
                "stalld (installed here) watches them, run by the starvation guard from the housekeeping CPUs: a thread runnable for {} s without running gets {} µs every {} ms for {} s, at most {} µs taken from the real-time task per boost (stalld's units and ranges; --guard-engine=cpushield for the guard's own); RT throttling off while it runs, as stalld requires ('cpushield status' counts the boosts)",
                p.threshold_s,
                p.runtime_ns / 1_000,
                p.period_ns / 1_000_000,
                p.duration_s,
                p.boost_cost_ns() / 1_000,
            );
        }
        format!(
            "the starvation guard watches them from the housekeeping CPUs: a thread runnable for {} s without running gets {} µs every {} ms for {} ms (twice as long and twice as often each time it starves again, up to 16 times), at most {} µs taken from the real-time task per boost of {} ms ('cpushield status' counts the boosts)",
            seconds(s.threshold_ms),
            s.runtime_us,
            seconds(s.period_us),
            s.duration_ms,
            s.runtime_us * (s.duration_ms * 1000).div_ceil(s.period_us),
            s.duration_ms
        )
    };
    match p {
        Protection::Guard { why, settings } => format!(
            "kernel work on the shielded CPUs (kworkers, RCU, timers) can starve behind a real-time task that never sleeps ({}): {}",
            starvable_text(*why),
            guard(settings)
        ),
        Protection::GuardAndKernel { settings } => format!(
            "kernel work on the shielded CPUs is protected by the kernel, and {} (--guard=on)",
            guard(settings)
        ),
        Protection::FairServer { inferred } => format!(
            "kernel work on the shielded CPUs is protected by the kernel's fair deadline server (ordinary tasks get 50 ms a second, also behind a real-time task that never sleeps){}; no guard needed",
            if *inferred { " (inferred from the kernel release: debugfs is not mounted)" } else { "" }
        ),
        Protection::Throttling { runtime_us, period_us } => format!(
            "kernel work on the shielded CPUs is protected by RT throttling: real-time tasks run at most {} ms of every {} ms, so a task that never sleeps loses {} ms of each; no guard needed",
            seconds((*runtime_us).max(0) as u64),
            seconds((*period_us).max(0) as u64),
            seconds((period_us - runtime_us).max(0) as u64)
        ),
        Protection::Nothing { why } => format!(
            "WARNING: nothing protects kernel work on the shielded CPUs ({}): a real-time task that never sleeps there hangs whatever waits for that work (sysctl writes, sync, service starts); leave out --guard=off",
            starvable_text(*why)
        ),
    }
}

/// Why kernel work can starve, in words.
pub fn starvable_text(why: Starvable) -> &'static str {
    match why {
        Starvable::PreemptRt => {
            "a PREEMPT_RT kernel: its timer and RCU threads are real-time tasks below the loop"
        }
        Starvable::NoThrottlingNoFairServer => {
            "RT throttling is off and this kernel has no fair deadline server"
        }
    }
}

/// A thousandth of `n` without trailing zeros: ms as s, µs as ms
/// (`1500` → `1.5`, `100000` → `100`).
fn seconds(n: u64) -> String {
    let s = format!("{:.3}", n as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn join(items: impl Iterator<Item = String>, separator: &str) -> String {
    items.collect::<Vec<_>>().join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn notes_read_as_the_sentences_the_shield_printed() {
        let cases = [
            (
                Note::MountingCgroup2 {
                    mount: "run/cpushield/cgroup2".into(),
                },
                "no cgroup hierarchy with cpuset is mounted: mounting cgroup2 at /run/cpushield/cgroup2 (off unmounts it)",
            ),
            (
                Note::SplitSiblings {
                    groups: vec![cpus("1,5"), cpus("2,6")],
                },
                "hyper-thread siblings split (1,5; 2,6): the unshielded siblings share a core with the shield; keep them idle",
            ),
            (
                Note::ShieldChangedInPlace {
                    from: cpus("2-3"),
                    to: cpus("3"),
                },
                "shield changed in place from CPUs 2-3 to 3: the shield stayed up throughout",
            ),
            (
                Note::TunedPins {
                    profile: "cpu-partitioning".into(),
                    pins: vec![
                        "profile cpu-partitioning".into(),
                        "cpu-partitioning: isolated_cores".into(),
                    ],
                },
                "tuned profile 'cpu-partitioning' pins CPUs or IRQs (profile cpu-partitioning, cpu-partitioning: isolated_cores): it may move threads and IRQs back onto the shield when it re-applies; use a profile without isolated_cores/banned_cpus (tuned-adm profile ...) while cpushield shields",
            ),
        ];
        for (note, sentence) in cases {
            assert_eq!(text(&note), sentence, "{note:?}");
        }
    }
}
