//! The kinds of load: each stressor (a kind of worker, named like the
//! stress-ng stressor it mirrors) and the scenarios that combine them.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// One kind of worker, named like the stress-ng stressor it mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stressor {
    /// Square roots in a loop.
    Cpu,
    /// `sync()` in a loop.
    Io,
    /// Allocate, touch every page, free.
    Vm,
    /// Write a file, unlink it.
    Hdd,
    /// Stream through memory far larger than the last-level cache (the
    /// STREAM triad): evicts what other CPUs keep in the shared cache and
    /// saturates the memory bus.
    Stream,
    /// Two threads passing a byte back and forth through pipes: a
    /// context switch each way, a scheduler storm like hackbench's.
    Switch,
    /// A TCP connection over loopback, 4 KiB each way and back: the
    /// network stack's softirqs and wake-ups.
    Sock,
}

impl Stressor {
    /// Its name: `cpu`, `io`, `vm`, `hdd`, `stream`, `switch`, `sock`.
    pub fn name(self) -> &'static str {
        match self {
            Stressor::Cpu => "cpu",
            Stressor::Io => "io",
            Stressor::Vm => "vm",
            Stressor::Hdd => "hdd",
            Stressor::Stream => "stream",
            Stressor::Switch => "switch",
            Stressor::Sock => "sock",
        }
    }
}

impl fmt::Display for Stressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stressor {
    type Err = UnknownName;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownName> {
        match s {
            "cpu" => Ok(Stressor::Cpu),
            "io" => Ok(Stressor::Io),
            "vm" => Ok(Stressor::Vm),
            "hdd" => Ok(Stressor::Hdd),
            "stream" => Ok(Stressor::Stream),
            "switch" => Ok(Stressor::Switch),
            "sock" => Ok(Stressor::Sock),
            _ => Err(UnknownName(s.to_string())),
        }
    }
}

/// A name that is not a known scenario or stressor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown load {} (expected cpu, io, vm, hdd, stream, full, mix, hackbench or none)", crate::input::quote(.0))]
pub struct UnknownName(pub String);

/// A background-load scenario: N workers of one stressor, all four, or none
/// (N = the number of CPUs the load runs on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// N workers on sqrt.
    Cpu,
    /// N workers on sync.
    Io,
    /// N workers on malloc/touch/free.
    Vm,
    /// N workers writing and unlinking files.
    Hdd,
    /// N workers streaming through memory (cache and memory-bus
    /// contention; not part of `full`, which is the CPU methodology's).
    Stream,
    /// cpu, io, vm and hdd at once.
    Full,
    /// What rteval runs beside its measurement, at once: a CPU and I/O
    /// load (cpu, io, hdd), memory and cache streaming (vm, stream), a
    /// scheduler storm (switch) and network loopback (sock).
    Mix,
    /// rteval's second load, hackbench's pattern: messages passed between
    /// tasks through pipes and local sockets, a scheduler and wake-up
    /// storm (switch and sock, N workers each).
    Hackbench,
    /// No load.
    None,
}

impl Scenario {
    /// Every scenario, in the order of the methodology.
    pub const ALL: [Scenario; 9] = [
        Scenario::Cpu,
        Scenario::Io,
        Scenario::Vm,
        Scenario::Hdd,
        Scenario::Stream,
        Scenario::Full,
        Scenario::Mix,
        Scenario::Hackbench,
        Scenario::None,
    ];

    /// The stressors this scenario runs, each with N workers.
    pub fn stressors(self) -> &'static [Stressor] {
        match self {
            Scenario::Cpu => &[Stressor::Cpu],
            Scenario::Io => &[Stressor::Io],
            Scenario::Vm => &[Stressor::Vm],
            Scenario::Hdd => &[Stressor::Hdd],
            Scenario::Stream => &[Stressor::Stream],
            Scenario::Full => &[Stressor::Cpu, Stressor::Io, Stressor::Vm, Stressor::Hdd],
            Scenario::Mix => &[
                Stressor::Cpu,
                Stressor::Io,
                Stressor::Vm,
                Stressor::Hdd,
                Stressor::Stream,
                Stressor::Switch,
                Stressor::Sock,
            ],
            Scenario::Hackbench => &[Stressor::Switch, Stressor::Sock],
            Scenario::None => &[],
        }
    }

    /// Its name: `cpu`, `io`, `vm`, `hdd`, `stream`, `full`, `mix`,
    /// `hackbench`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Mix => "mix",
            Scenario::Hackbench => "hackbench",
            Scenario::Stream => "stream",
            Scenario::Cpu => "cpu",
            Scenario::Io => "io",
            Scenario::Vm => "vm",
            Scenario::Hdd => "hdd",
            Scenario::Full => "full",
            Scenario::None => "none",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = UnknownName;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownName> {
        Scenario::ALL
            .into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| UnknownName(s.to_string()))
    }
}
