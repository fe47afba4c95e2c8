//! Options, phases and results built from literal samples, for the tests
//! of compare and of its report.

use std::path::PathBuf;

use super::results::{
    assemble, parse_measurement, virtualised_note, PhaseRecord, Results, SCHEMA_VERSION,
};
use super::{Options, Phase};
use crate::cpulist::CpuSet;
use crate::load::Scenario;
use crate::measure::histogram::Histogram;
use crate::measure::machine::Machine;
use crate::measure::results::{Measurement, Tool};
use crate::measure::testing::{cpu, sample_run};
use crate::measure::ProbeKind;
use crate::sys::Sys;

/// A CPU list.
pub fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

/// Options for CPUs `c`: cpu load, timer probe, 1 s, 100 µs and 1 ms, every phase.
pub fn opts(c: &str) -> Options {
    Options {
        cpus: cpus(c),
        load: Scenario::Cpu,
        probe: ProbeKind::Timer,
        duration_s: 1.0,
        thresholds_us: vec![100.0, 1000.0],
        phases: Phase::ALL.to_vec(),
        out: PathBuf::from("x"),
        explain_us: None,
        cache: Default::default(),
        cache_ways: None,
        watch_every_s: None,
        checkpoint: false,
        shield: None,
        existing_shield: None,
        timing: Default::default(),
    }
}

/// What `cpushield measure --json` prints for a timer run on CPU 2
/// with these samples (ns, 1 µs buckets), read back as compare reads it.
pub fn measured(values_ns: &[u64]) -> Measurement {
    let mut run = sample_run();
    let mut h = Histogram::new(10, 1000);
    for (i, &v) in values_ns.iter().enumerate() {
        h.record(i as u64, v);
    }
    run.probes[0].cpus = vec![cpu(2, h.clone())];
    run.probes[0].all = h;
    let printed = serde_json::to_string(&Measurement::of(&run)).unwrap();
    serde_json::from_str(&printed).expect("measure's JSON reads back as its own type")
}

/// A phase whose samples are 1, 1.5 µs and `max_ns`.
pub fn record(phase: Phase, max_ns: u64) -> PhaseRecord {
    let m = measured(&[1000, 1500, max_ns]);
    PhaseRecord {
        phase: phase.name(),
        command: vec!["cpushield".into(), "measure".into()],
        load: None,
        load_stop: None,
        shield: None,
        unshield: None,
        elapsed_s: 1.0,
        measured: parse_measurement(phase.name(), &m, &[2.0]).unwrap(),
        measurement: m,
        watch: vec![],
    }
}

/// Results of the three phases on CPU 2 (maxima 2, 8 and 4 µs).
pub fn full_results(virtualised: Option<bool>, note: bool) -> Results {
    let phases = vec![
        record(Phase::Idle, 2000),
        record(Phase::Unshielded, 8000),
        record(Phase::Shielded, 4000),
    ];
    let summary = assemble(&phases, &[2.0]);
    let mut machine = Machine::read(&Sys::at("/nonexistent-root"));
    machine.virtualised = virtualised;
    Results {
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        started_unix_s: 0.0,
        interrupted: false,
        options: opts("2"),
        housekeeping: cpus("0-1"),
        load_driver: "builtin".into(),
        machine,
        virtualised_note: note.then(|| virtualised_note(Some(true))).flatten(),
        balancer_note: None,
        phases,
        ratios: summary.ratios(),
        summary,
    }
}
