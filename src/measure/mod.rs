//! Latency measurement: how cpushield proves what a shield does.
//!
//! Reproduces the published methods (cyclictest's timer wake-up latency,
//! realfeel's RTC interrupt response, osnoise/oslat's OS noise, clock_gettime
//! pairs, a periodic thread, the latency of loads through working sets the
//! size of each cache level ([cache]), reads of a PCI function ([device])) and reports them with percentiles, per-CPU and
//! ALL rows and a description of the machine. The flow is
//! `configure ([args]) → isolate self, warm up, loop ([driver], [probes]) →
//! aggregate ([histogram]) → results ([results])`; `report::measure` renders
//! them: measuring and reporting are separate.

pub mod args;
pub mod cache;
pub mod device;
pub mod driver;
pub mod explain;
pub mod histogram;
pub mod interrupts;
mod job;
pub mod live;
pub mod machine;
mod noise;
pub mod probes;
pub mod progress;
pub mod results;
#[cfg(test)]
pub(crate) mod testing;
pub mod threads;

use std::path::PathBuf;

pub use args::{Config, MeasureArgs, ProbeKind};
pub use driver::{measure, Run};

use crate::cpulist::CpuSet;
use crate::sys::{Sys, SysError};

/// Why a measurement could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// An option has a value outside its valid range.
    #[error(
        "invalid {option} {}: valid values are {valid}",
        crate::input::quote(value)
    )]
    InvalidOption {
        /// The option (`--interval`).
        option: &'static str,
        /// What was given.
        value: String,
        /// What is accepted.
        valid: String,
    },
    /// A requested CPU is not online.
    #[error("CPU {} of --cpus {} is not online; online CPUs: {}", unknown.brief(), requested.brief(), online.brief())]
    UnknownCpu {
        /// The requested set.
        requested: CpuSet,
        /// The requested CPUs that are not online.
        unknown: CpuSet,
        /// The online CPUs.
        online: CpuSet,
    },
    /// The kernel refused a privilege the measurement needs.
    #[error("not permitted to {what}: {source} (run as root, or grant CAP_SYS_NICE / raise RLIMIT_RTPRIO and RLIMIT_MEMLOCK)")]
    NotPermitted {
        /// What was attempted.
        what: String,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// Reading the machine failed.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// `--explain` could not trace (nothing was changed) or clean up.
    #[error(transparent)]
    Explain(#[from] explain::ExplainError),
    /// Writing a report file failed.
    #[error("cannot write {}: {source}", path.display())]
    Output {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Any other I/O step failed.
    #[error("{what}: {source}")]
    Io {
        /// The step.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// `cpushield measure` with a configuration checked by
/// [`Config::from_args`]: check privileges, measure on the machine behind
/// `sys`. The caller reports the run (`report::measure`).
pub fn run(sys: &Sys, cfg: &Config) -> Result<Run, MeasureError> {
    if let Some(p) = cfg.priority {
        driver::check_realtime_permitted(p)?;
    }
    let machine = machine::Machine::read(sys);
    measure(cfg, sys, machine)
}
