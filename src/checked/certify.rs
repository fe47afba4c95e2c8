//! `certify`'s request checked: the budget, the duration and what it can
//! decide, the load and the probe matched to the workload, the target, the
//! baseline, and `--from`'s recorded file.

use std::path::PathBuf;

use anyhow::Result;
use cpushield::config::AtLine;
use cpushield::input::quote;
use cpushield::shield::request::Request;
use cpushield::sys::Sys;

use super::{active_shield, duration, flag_or_key, named_by_time, Checked, Refusal};
use crate::cli::CertifyArgs;

pub(super) fn certify(sys: &Sys, a: CertifyArgs) -> Result<Checked> {
    let (config, section) = match &a.config {
        Some(path) => {
            let (r, s) = cpushield::config::load_with_certify(path)?;
            (Some(r), s)
        }
        None => (None, Default::default()),
    };
    let cfg = a.config.as_deref();
    if a.from.is_some() {
        return certify_from(a);
    }
    let shield_cpus = cpushield::shield::journal::read_state(sys)?.map(|s| s.shield);
    let active = shield_cpus.is_some();
    let cpus = a.cpus.clone();
    let cpus = cpus
        .or(config.as_ref().map(|r| r.cpus.clone()))
        .or(shield_cpus);
    let Some(cpus) = cpus else {
        return Err(Refusal(
            "certify: --cpus is required (the CPUs to shield and measure, e.g. --cpus 2-3), or --config FILE".into(),
        ).into());
    };
    let Some((budget, from)) = flag_or_key(a.budget, "--budget", section.budget, cfg) else {
        return Err(Refusal(
            "certify: --budget is required (e.g. --budget 'max<=100us,p99.99<=50us'), or budget in the config's [certify]".into(),
        ).into());
    };
    let budget =
        cpushield::certify::budget::parse(&budget).map_err(|e| Refusal(format!("{from}: {e}")))?;
    let seconds = match flag_or_key(a.duration, "--duration", section.duration, cfg) {
        Some((text, from)) => duration(&text, &from)?,
        None => 600.0,
    };
    let (load, probe) = load_and_probe(
        (a.load, a.probe),
        (section.load.clone(), section.probe.clone()),
        cfg,
    )?;
    let (confidence, from) = flag_or_key(a.confidence, "--confidence", section.confidence, cfg)
        .unwrap_or((95.0, String::new()));
    if !(50.0..=99.9999).contains(&confidence) {
        return Err(Refusal(format!(
            "{from} {confidence}: give a percentage from 50 to 99.9999"
        ))
        .into());
    }
    let timing = probe_timing(
        cpushield::compare::ProbeTiming {
            interval_us: a.interval,
            priority: a.priority,
            dma_latency_us: a.dma_latency,
        },
        probe,
    )?;
    let target = certify_target(&a.target, a.mission)?;
    let baseline = certify_baseline(
        (a.baseline, a.regression),
        (section.baseline, section.regression),
        cfg,
    )?;
    let explain = flag_or_key(a.explain, "--explain", section.explain, cfg);
    if let Some((us, from)) = &explain {
        if !(1..=10_000_000).contains(us) {
            return Err(Refusal(format!("{from} {us}: give 1 to 10000000 µs")).into());
        }
    }
    let out = flag_or_key(a.out, "--out", section.out, cfg).map(|(dir, _)| dir);
    let out = out.map(super::output_dir).transpose()?;
    let new_out = out.is_none();
    let out = out.unwrap_or_else(|| named_by_time("cpushield-certify"));
    let feasibility = decidable(&budget, seconds, (probe, a.interval), confidence, a.force)?;
    let mut compare =
        cpushield::certify::Options::measuring(cpus, (load, probe), seconds, &budget, out);
    compare.explain_us = explain.map(|(us, _)| us);
    compare.timing = timing;
    compare.existing_shield =
        active_shield(sys, (active, &compare.cpus), cfg.zip(config.as_ref()))?;
    // A shield of its own: the config's without its boot half (certify
    // changes nothing that outlives a reboot); inside an active one, none.
    compare.shield = config
        .filter(|_| compare.existing_shield.is_none())
        .map(|r| Request { boot: None, ..r });
    Ok(Checked::Certify {
        options: cpushield::certify::Options {
            compare,
            budget,
            confidence: confidence / 100.0,
            baseline,
            from: None,
            target,
            feasibility,
        },
        dry_run: a.dry_run,
        json: a.json,
        new_out,
    })
}

/// `certify --from FILE`: the budget, confidence, baseline and output
/// directory checked as for a run; nothing is measured.
fn certify_from(a: CertifyArgs) -> Result<Checked> {
    let Some(budget) = a.budget else {
        return Err(Refusal(
            "certify --from: --budget is required (e.g. --budget 'max<=100us,p99.99<=50us')".into(),
        )
        .into());
    };
    let budget = cpushield::certify::budget::parse(&budget)
        .map_err(|e| Refusal(format!("--budget: {e}")))?;
    let confidence = a.confidence.unwrap_or(95.0);
    if !(50.0..=99.9999).contains(&confidence) {
        return Err(Refusal(format!(
            "--confidence {confidence}: give a percentage from 50 to 99.9999"
        ))
        .into());
    }
    let baseline = certify_baseline((a.baseline, a.regression), (None, None), None)?;
    let new_out = a.out.is_none();
    let out = a.out.map(super::output_dir).transpose()?;
    let out = out.unwrap_or_else(|| named_by_time("cpushield-certify"));
    let cpus = a.cpus.unwrap_or_default();
    let compare = cpushield::certify::Options::measuring(
        cpus,
        (
            cpushield::load::Scenario::None,
            cpushield::measure::ProbeKind::Timer,
        ),
        0.0,
        &budget,
        out,
    );
    Ok(Checked::Certify {
        options: cpushield::certify::Options {
            compare,
            budget,
            confidence: confidence / 100.0,
            baseline,
            target: certify_target(&a.target, a.mission)?,
            from: a.from,
            feasibility: Vec::new(),
        },
        dry_run: false,
        json: a.json,
        new_out,
    })
}

/// `certify`'s load and probe: the flag, else the config's key (named by
/// its file and line when bad), else mix and timer.
fn load_and_probe(
    (flag_load, flag_probe): (
        Option<cpushield::load::Scenario>,
        Option<cpushield::measure::ProbeKind>,
    ),
    (key_load, key_probe): (Option<AtLine<String>>, Option<AtLine<String>>),
    cfg: Option<&std::path::Path>,
) -> Result<(cpushield::load::Scenario, cpushield::measure::ProbeKind), Refusal> {
    let in_config = |line: usize| {
        format!(
            "{}:{line}",
            cfg.unwrap_or(std::path::Path::new("")).display()
        )
    };
    let load = match (flag_load, key_load) {
        (Some(load), _) => load,
        (None, Some(k)) => k
            .value
            .parse()
            .map_err(|e| Refusal(format!("{}: load: {e}", in_config(k.line))))?,
        (None, None) => cpushield::load::Scenario::Mix,
    };
    let probe = match (flag_probe, key_probe) {
        (Some(p), _) => p,
        (None, Some(k)) => certify_probe(&k.value).ok_or_else(|| {
            Refusal(format!(
                "{}: probe: {}: give timer, rtc, noise, gtod, periodic or cache",
                in_config(k.line),
                quote(&k.value)
            ))
        })?,
        (None, None) => cpushield::measure::ProbeKind::Timer,
    };
    Ok((load, probe))
}

/// The probe matched to the workload: `--interval` only where the probe
/// has a period, at least 1 µs.
fn probe_timing(
    timing: cpushield::compare::ProbeTiming,
    probe: cpushield::measure::ProbeKind,
) -> Result<cpushield::compare::ProbeTiming, Refusal> {
    use cpushield::measure::ProbeKind;
    if let Some(us) = timing.interval_us {
        if !matches!(probe, ProbeKind::Timer | ProbeKind::Periodic) {
            return Err(Refusal(format!(
                "--interval: the {} probe has no period of its own; give it with --probe timer or periodic",
                probe.name()
            )));
        }
        if us == 0 {
            return Err(Refusal("--interval 0: give at least 1 µs".into()));
        }
    }
    Ok(timing)
}

/// Whether the run can decide each term; one that cannot is refused
/// unless `force`.
fn decidable(
    budget: &[cpushield::certify::budget::Term],
    seconds: f64,
    (probe, interval_us): (cpushield::measure::ProbeKind, Option<u64>),
    confidence_pct: f64,
    force: bool,
) -> Result<Vec<cpushield::certify::Feasibility>, Refusal> {
    let feasibility = deadlines_per_second(probe, interval_us)
        .map(|rate| cpushield::certify::feasibility(budget, seconds, rate, confidence_pct / 100.0))
        .unwrap_or_default();
    let undecidable: Vec<&str> = (feasibility.iter())
        .filter(|f| !f.decidable)
        .map(|f| f.line.as_str())
        .collect();
    if !undecidable.is_empty() && !force {
        return Err(Refusal(format!(
            "certify: the run cannot decide {}: {} (a longer --duration, or --force to run anyway)",
            if undecidable.len() == 1 {
                "a term"
            } else {
                "terms"
            },
            undecidable.join("; ")
        )));
    }
    Ok(feasibility)
}

/// `--target` over `--mission` (default an hour), or none.
fn certify_target(
    target: &Option<String>,
    mission: Option<f64>,
) -> Result<Option<cpushield::certify::budget::Target>, Refusal> {
    match (target, mission) {
        (None, Some(_)) => Err(Refusal(
            "--mission: a mission time needs a target (--target 1e-9)".into(),
        )),
        (None, None) => Ok(None),
        (Some(t), m) => cpushield::certify::budget::parse_target(t, m.unwrap_or(3600.0))
            .map(Some)
            .map_err(Refusal),
    }
}

/// Deadlines a second of the probes that keep a fixed rate: the timer's
/// and the periodic probe's interval (`interval_us`, or their default),
/// the RTC's 2048 Hz.
fn deadlines_per_second(
    probe: cpushield::measure::ProbeKind,
    interval_us: Option<u64>,
) -> Option<f64> {
    use cpushield::measure::ProbeKind;
    match probe {
        ProbeKind::Timer | ProbeKind::Periodic => {
            let us = interval_us.or(probe.default_interval_us())?;
            Some(1e6 / us.max(1) as f64)
        }
        ProbeKind::Rtc => Some(2048.0),
        _ => None,
    }
}

/// A probe `certify` takes, by name (pci is `measure`'s alone).
fn certify_probe(name: &str) -> Option<cpushield::measure::ProbeKind> {
    use clap::ValueEnum;
    cpushield::measure::ProbeKind::from_str(name, false)
        .ok()
        .filter(|p| *p != cpushield::measure::ProbeKind::Pci)
}

/// `certify`'s baseline, read, with its regression threshold; a threshold
/// without a baseline is refused.
fn certify_baseline(
    (flag_dir, flag_pct): (Option<PathBuf>, Option<f64>),
    (key_dir, key_pct): (Option<AtLine<PathBuf>>, Option<AtLine<f64>>),
    cfg: Option<&std::path::Path>,
) -> Result<Option<cpushield::certify::baseline::Baseline>, Refusal> {
    let regression = flag_or_key(flag_pct, "--regression", key_pct, cfg);
    let baseline = flag_or_key(flag_dir, "--baseline", key_dir, cfg);
    let pct = match (&regression, &baseline) {
        (Some((_, from)), None) => {
            return Err(Refusal(format!(
                "{from}: a regression threshold needs a baseline (--baseline DIR)"
            )))
        }
        (Some((pct, from)), Some(_)) if !(0.0..=1000.0).contains(pct) => {
            return Err(Refusal(format!(
                "{from} {pct}: give a percentage from 0 to 1000"
            )))
        }
        (Some((pct, _)), _) => *pct,
        (None, _) => 20.0,
    };
    match baseline {
        Some((dir, from)) => cpushield::certify::baseline::Baseline::read(&dir, pct / 100.0)
            .map(Some)
            .map_err(|e| Refusal(format!("{from}: {e}"))),
        None => Ok(None),
    }
}
