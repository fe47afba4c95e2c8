//! The CPUs' idle states as cpuidle exposes them
//! (`/sys/devices/system/cpu/cpuN/cpuidle/stateM`): what the audit reads
//! and the idle-state component of the shield plans from.

use serde::{Deserialize, Serialize};

use super::Sys;

/// One idle state of a CPU, as cpuidle exposes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    /// Its directory, `stateN`.
    pub state: String,
    /// Its name (`POLL`, `C1`, `C6`, ...).
    pub name: String,
    /// Its exit latency, µs.
    pub latency_us: u64,
    /// Whether its `disable` file reads 1.
    pub disabled: bool,
    /// Whether its `disable` file may be written.
    pub writable: bool,
    /// How many times the CPU entered it since boot (`usage`).
    pub usage: u64,
}

/// The cpuidle states of `cpu`, in the kernel's order (`state0`, `state1`,
/// ...); none without a cpuidle driver.
pub fn read_states(sys: &Sys, cpu: u32) -> Vec<IdleState> {
    let base = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let mut states: Vec<IdleState> = (sys.list(&base))
        .unwrap_or_default()
        .into_iter()
        .filter(|st| st.starts_with("state"))
        .map(|st| {
            let file = |n: &str| format!("{base}/{st}/{n}");
            let read = |n: &str| sys.read_trimmed(&file(n)).ok();
            let number = |n: &str| read(n).and_then(|v| v.parse().ok()).unwrap_or(0);
            IdleState {
                name: read("name").unwrap_or_default(),
                latency_us: number("latency"),
                disabled: read("disable").as_deref() == Some("1"),
                writable: sys.mode_allows_write(&file("disable")),
                usage: number("usage"),
                state: st,
            }
        })
        .collect();
    states.sort_by_key(|s| s.state[5..].parse::<u32>().unwrap_or(u32::MAX));
    states
}
