//! The experiments: `compare` and `certify`, each run with Ctrl-C and
//! SIGTERM stopping it, its files written, its summary or verdict shown.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cpushield::exit;
use cpushield::report;
use cpushield::sys::Sys;

use crate::checked::Refusal;
use crate::stop_flag;

/// `certify`: the measurement (or the recorded file `--from` names), the
/// verdict, its files (in a directory made new when it is the default
/// one); the exit code says PASS, FAIL or INCONCLUSIVE.
pub(crate) fn certify(
    sys: &Sys,
    mut opts: cpushield::certify::Options,
    (dry_run, new_out): (bool, bool),
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    use cpushield::certify::verdict::Outcome;
    if new_out && !dry_run {
        opts.compare.out = cpushield::durable::new_dir(&opts.compare.out)?;
    }
    let opts = &opts;
    let exe = std::env::current_exe().context("finding our own executable")?;
    if dry_run {
        let plan = cpushield::compare::dry_run(sys, &exe, &opts.compare)?;
        let terms: Vec<&str> = opts.budget.iter().map(|t| t.text.as_str()).collect();
        if json {
            let preflight =
                cpushield::certify::preflight::read(sys, &opts.compare.cpus, &opts.budget)
                    .map_err(|e| e.to_string());
            let report = serde_json::json!({
                "schema_version": cpushield::report::JSON_SCHEMA_VERSION,
                "dry_run": true,
                "budget": terms,
                "confidence": opts.confidence,
                "duration_s": opts.compare.duration_s,
                "feasibility": opts.feasibility,
                "preflight": preflight.as_ref().ok(),
                "preflight_error": preflight.as_ref().err(),
                "plan": plan,
            });
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
            return Ok(ExitCode::SUCCESS);
        }
        writeln!(
            out,
            "certify (dry run): budget {} at {}% confidence, measured for {} s",
            terms.join(", "),
            opts.confidence * 100.0,
            opts.compare.duration_s
        )?;
        report::compare::dry_run(&plan, out)?;
        if !opts.feasibility.is_empty() {
            writeln!(out, "what the run can decide:")?;
            for f in &opts.feasibility {
                let mark = if f.decidable { "ok" } else { "cannot decide" };
                writeln!(out, "  {mark:<14} {}", f.line)?;
            }
        }
        match cpushield::certify::preflight::read(sys, &opts.compare.cpus, &opts.budget) {
            Ok(p) => {
                writeln!(out, "before the run:")?;
                for line in report::certify::preflight_lines(&p) {
                    writeln!(out, "  {line}")?;
                }
            }
            Err(e) => writeln!(out, "before the run: the audit could not be read: {e}")?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dir = &opts.compare.out;
    let (r, page) = match &opts.from {
        Some(file) => {
            let r = cpushield::certify::judge_file(opts, file).map_err(Refusal)?;
            (r, report::html::HtmlReport::default())
        }
        None => {
            let r = with_experiment(sys, exe, "certify", |ctx| {
                cpushield::certify::run(ctx, opts)
            })?;
            let page = match &r.measurement {
                Some(m) => report::compare::write_data_files(m, dir)?,
                None => Default::default(),
            };
            (r, page)
        }
    };
    report::certify::write_files(&r, page, dir)
        .with_context(|| format!("writing the verdict into {}", dir.display()))?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &r)?;
        writeln!(out)?;
    } else {
        report::certify::verdict(&r, out)?;
        writeln!(
            out,
            "\nFiles: {} (certify.json, junit.xml, report.html)",
            dir.display()
        )?;
    }
    Ok(match r.outcome {
        Outcome::Pass => ExitCode::SUCCESS,
        Outcome::Fail => ExitCode::from(exit::BUDGET_FAILED),
        Outcome::Inconclusive => ExitCode::from(exit::BUDGET_INCONCLUSIVE),
    })
}

/// Runs `experiment` (compare's phases) with Ctrl-C and SIGTERM stopping
/// it, the load driven by this executable, and progress on a terminal
/// only, each line led by `command`.
fn with_experiment<T>(
    sys: &Sys,
    exe: std::path::PathBuf,
    command: &str,
    experiment: impl FnOnce(
        &mut cpushield::compare::Context<'_>,
    ) -> std::result::Result<T, cpushield::compare::CompareError>,
) -> Result<T> {
    use std::io::IsTerminal;
    let stop = stop_flag()?;
    let tty = std::io::stderr().is_terminal();
    let mut progress = |line: &str| {
        if tty {
            eprintln!("cpushield {command}: {line}");
        }
    };
    let mut ctx = cpushield::compare::Context {
        sys,
        driver: cpushield::load::Driver::auto(exe.clone()),
        exe,
        stop: &stop,
        progress: &mut progress,
    };
    Ok(experiment(&mut ctx)?)
}

/// `compare`: the experiment, its files (in a directory made new when it
/// is the default one), and its summary.
pub(crate) fn compare(
    sys: &Sys,
    mut opts: cpushield::compare::Options,
    (dry_run, new_out): (bool, bool),
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    use cpushield::compare;
    if new_out && !dry_run {
        opts.out = cpushield::durable::new_dir(&opts.out)?;
    }
    let opts = &opts;
    let dir = opts.out.clone();
    let exe = std::env::current_exe().context("finding our own executable")?;
    if dry_run {
        let plan = compare::dry_run(sys, &exe, opts)?;
        if json {
            let report = serde_json::json!({
                "schema_version": cpushield::report::JSON_SCHEMA_VERSION,
                "dry_run": true,
                "plan": plan,
            });
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        } else {
            report::compare::dry_run(&plan, out)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let results = with_experiment(sys, exe, "compare", |ctx| compare::run(ctx, opts))?;
    report::compare::write_files(&results, &dir)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &results)?;
        writeln!(out)?;
    } else {
        out.write_all(report::compare::summary_text(&results).as_bytes())?;
        writeln!(out, "\nReport: {}", dir.join("report.html").display())?;
    }
    if results.interrupted {
        return Ok(ExitCode::from(exit::INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}
