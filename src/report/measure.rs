//! Reporting of a measurement: human table, versioned JSON, cyclictest
//! histogram files.
//!
//! Reporting is separate from measuring: everything here is a pure
//! function of a [`Run`] (plus writing the histogram file), so the formats
//! are tested without measuring anything.
//!
//! `--json` prints [`super::results::Measurement`], the typed contract
//! that `compare` reads back.

use std::fmt::Write as _;
use std::path::Path;

use crate::measure::args::{ProbeKind, Stop};
use crate::measure::driver::{CpuResult, ProbeResult, Run, Status};
use crate::measure::histogram::Histogram;
use crate::measure::interrupts::Delta;
use crate::measure::results::{Measurement, SCHEMA_VERSION};
use crate::measure::threads::ThreadsRan;
use crate::measure::MeasureError;

/// The run as pretty-printed JSON, newline-terminated.
pub fn json(run: &Run) -> String {
    let mut s = serde_json::to_string_pretty(&Measurement::of(run)).unwrap_or_else(|e| {
        // Serialising plain structs cannot fail; keep the output valid JSON anyway.
        format!(
            "{{\"schema_version\": {SCHEMA_VERSION}, \"error\": {:?}}}",
            e.to_string()
        )
    });
    s.push('\n');
    s
}

/// How values of a probe are shown: µs with one decimal, or ns (gtod).
#[derive(Clone, Copy)]
struct Unit {
    ns: bool,
}

impl Unit {
    fn of(p: ProbeKind) -> Unit {
        Unit {
            ns: matches!(p, ProbeKind::Gtod | ProbeKind::Cache),
        }
    }
    fn name(self) -> &'static str {
        if self.ns {
            "ns"
        } else {
            "µs"
        }
    }
    fn f(self, ns: Option<f64>) -> String {
        match ns {
            None => "-".into(),
            Some(v) if self.ns => format!("{v:.0}"),
            Some(v) => format!("{:.1}", v / 1000.0),
        }
    }
    fn u(self, ns: Option<u64>) -> String {
        self.f(ns.map(|v| v as f64))
    }
}

fn title(p: ProbeKind) -> &'static str {
    match p {
        ProbeKind::Timer => "timer wake-up latency (clock_nanosleep, cyclictest method)",
        ProbeKind::Rtc => "RTC interrupt response at 2048 Hz (realfeel method)",
        ProbeKind::Noise => "OS noise: gaps in a cycle-counter loop (osnoise method)",
        ProbeKind::Gtod => "time between back-to-back clock_gettime calls",
        ProbeKind::Periodic => "periodic thread: lateness of each period start",
        ProbeKind::Cache => {
            "cache: load latency of a random pointer chase through L1d-, L2- and L3-share-sized working sets (every level)"
        }
        ProbeKind::Pci => {
            "pci: time of one 4-byte read of a PCI function's register (config space: the whole pread; a BAR: one load)"
        }
    }
}

fn human_duration(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{:.2} s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2} ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} µs", n as f64 / 1e3),
        n => format!("{n} ns"),
    }
}

fn stats_row(out: &mut String, label: &str, h: &Histogram, missed: Option<u64>, unit: Unit) {
    let s = h.summary();
    let pct = |i: usize| match s.percentiles[i].value_ns {
        Some(v) => unit.u(Some(v)),
        None if s.samples > 0 => {
            format!(">{}", unit.u(Some(h.counts().len() as u64 * h.width_ns())))
        }
        None => "-".into(),
    };
    let _ = writeln!(
        out,
        "{label:>4} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6}",
        s.samples,
        unit.u(s.min_ns),
        unit.f(s.avg_ns),
        unit.u(s.max_ns),
        unit.f(s.stddev_ns),
        pct(0),
        pct(1),
        pct(2),
        pct(3),
        pct(4),
        s.overflows,
        missed.map_or("-".to_string(), |m| m.to_string()),
    );
}

fn deltas_line(d: &[Delta], max: usize) -> String {
    if d.is_empty() {
        return "none".into();
    }
    let mut parts: Vec<String> = d
        .iter()
        .take(max)
        .map(|d| format!("{} {}", d.source, d.count))
        .collect();
    if d.len() > max {
        parts.push(format!("+{} more", d.len() - max));
    }
    parts.join(", ")
}

fn config_line(run: &Run) -> String {
    let c = &run.config;
    let sched = match c.priority {
        Some(p) => format!("SCHED_FIFO {p}"),
        None => "SCHED_OTHER".into(),
    };
    let stop = match c.stop {
        Stop::Loops(n) => format!("{n} loops"),
        Stop::Duration(d) => format!("{:.1} s", d.as_secs_f64()),
    };
    let probes: Vec<&str> = c.probes.iter().map(|p| p.name()).collect();
    let mut line = format!(
        "measure {} on CPU {} · {sched} · {stop}",
        probes.join(","),
        c.cpus
    );
    if let Some(us) = c.dma_latency_us {
        let _ = write!(line, " · cpu_dma_latency {us} µs");
    }
    if run.interrupted {
        line.push_str(" · interrupted (Ctrl-C)");
    }
    line
}

/// The human report: configuration and machine, then one table per probe.
pub fn human(run: &Run) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", config_line(run));
    let _ = writeln!(out, "{}", run.machine.one_line());
    let b = &run.machine.boot_params;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "boot: isolcpus={} nohz_full={} rcu_nocbs={} irqaffinity={}",
        opt(&b.isolcpus),
        opt(&b.nohz_full),
        opt(&b.rcu_nocbs),
        opt(&b.irqaffinity)
    );
    for p in &run.probes {
        out.push('\n');
        human_probe(&mut out, p);
    }
    out
}

fn human_probe(out: &mut String, p: &ProbeResult) {
    let unit = Unit::of(p.probe);
    let interval = p
        .interval_ns
        .map(|ns| format!(", interval {}", human_duration(ns)))
        .unwrap_or_default();
    let _ = writeln!(out, "{}{interval}", title(p.probe));
    if let Status::Skipped(reason) = &p.status {
        let _ = writeln!(out, "  skipped: {reason}");
        return;
    }
    if let Some(n) = &p.note {
        let _ = writeln!(out, "  note: {n}");
    }
    let u = unit.name();
    let _ = writeln!(
        out,
        "{:>4} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6}",
        "CPU",
        "samples",
        "min",
        "avg",
        "max",
        "stddev",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "over",
        "missed"
    );
    let has_missed = matches!(
        p.probe,
        ProbeKind::Timer | ProbeKind::Periodic | ProbeKind::Rtc
    );
    let mut total_missed = 0;
    for c in &p.cpus {
        total_missed += c.missed;
        stats_row(
            out,
            &c.cpu.to_string(),
            &c.hist,
            has_missed.then_some(c.missed),
            unit,
        );
    }
    if p.cpus.len() > 1 {
        stats_row(out, "ALL", &p.all, has_missed.then_some(total_missed), unit);
    }
    let _ = writeln!(
        out,
        "  values in {u}; percentiles are upper edges of {} buckets (true value up to one bucket less); run {:.1} s",
        human_duration(p.all.width_ns()),
        p.elapsed.as_secs_f64()
    );
    if p.probe == ProbeKind::Noise {
        let _ = writeln!(
            out,
            "{:>4} {:>10} {:>10} {:>9} {:>8} {:>10}",
            "CPU", "runtime", "noise", "avail", "gaps", "max gap"
        );
        for c in &p.cpus {
            if let Some(n) = &c.noise {
                let _ = writeln!(
                    out,
                    "{:>4} {:>10} {:>10} {:>8.3}% {:>8} {:>10}",
                    c.cpu,
                    human_duration(n.runtime_ns),
                    human_duration(n.noise_ns),
                    n.cpu_available_pct,
                    n.gaps,
                    human_duration(n.max_gap_ns),
                );
            }
        }
    }
    cache_levels(out, p);
    device_reads(out, p);
    for c in &p.cpus {
        attribution(out, c);
    }
    if let Some(e) = &p.explain {
        super::explain::explained(out, e);
    }
}

/// The pci probe's register and, per CPU, what was read back.
fn device_reads(out: &mut String, p: &ProbeResult) {
    let mut first = true;
    for c in &p.cpus {
        let Some(r) = &c.pci else { continue };
        if first {
            first = false;
            let _ = writeln!(
                out,
                "  register: {} (/{}, {} bytes); {:.3} TSC ticks per ns, timing overhead {} cycles taken off each sample",
                r.target.describe(),
                r.target.file,
                r.target.region_bytes,
                r.tsc_ticks_per_ns,
                r.timing_overhead_cycles
            );
        }
        let value = |v: Option<u32>| v.map_or("-".into(), |v| format!("0x{v:08x}"));
        let same = if r.changed == 0 {
            format!("{} on every read", value(r.first_value))
        } else {
            format!(
                "first {}, last {}, {} reads differed from the first",
                value(r.first_value),
                value(r.last_value),
                r.changed
            )
        };
        let short = if r.short_reads > 0 {
            format!(", {} short reads", r.short_reads)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  read back on CPU {}: {same} ({} reads, warm-up included{short})",
            c.cpu, r.reads
        );
    }
}

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The cache probe's table: per CPU and level, the working set and the
/// load latency in ns and in TSC ticks; then each level's note and how
/// the ticks were counted.
fn cache_levels(out: &mut String, p: &ProbeResult) {
    let with_cache: Vec<_> = p
        .cpus
        .iter()
        .filter_map(|c| c.cache.as_ref().map(|j| (c.cpu, j)))
        .collect();
    if with_cache.is_empty() {
        return;
    }
    let ns = Unit { ns: true };
    let _ = writeln!(
        out,
        "{:>4} {:>7} {:>10} {:>9} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} | {:>6} {:>6} {:>8}",
        "CPU",
        "level",
        "set",
        "samples",
        "min",
        "p50",
        "p99",
        "p99.9",
        "max",
        "over",
        "p50",
        "p99",
        "max"
    );
    for (cpu, job) in &with_cache {
        for l in &job.levels {
            let h = &l.ns;
            let c = &l.cycles;
            let pct = |h: &Histogram, p: f64| match h.percentile(p) {
                Some(v) => v.to_string(),
                None if h.samples() > 0 => format!(">{}", h.counts().len() as u64 * h.width_ns()),
                None => "-".into(),
            };
            let _ = writeln!(
                out,
                "{:>4} {:>7} {:>10} {:>9} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} | {:>6} {:>6} {:>8}",
                cpu,
                l.set.level,
                bytes(l.set.bytes),
                h.samples(),
                ns.u(h.min_ns()),
                pct(h, 50.0),
                pct(h, 99.0),
                pct(h, 99.9),
                ns.u(h.max_ns()),
                h.overflows(),
                pct(c, 50.0),
                pct(c, 99.0),
                c.max_ns().map_or("-".into(), |v| v.to_string()),
            );
        }
    }
    let _ = writeln!(
        out,
        "  left of | ns, right of | TSC ticks (the constant-rate counter, not core cycles); set: the walk's working set (L3: the CPU's share)"
    );
    for (cpu, job) in &with_cache {
        for l in &job.levels {
            if let Some(note) = &l.set.note {
                let _ = writeln!(out, "  CPU {cpu} {}: {note}", l.set.level);
            }
            let huge = crate::sys::syscalls::HUGE_PAGE_BYTES as u64;
            if let (Some(kib), true) = (l.huge_pages_kib, l.set.bytes >= huge) {
                let _ = writeln!(
                    out,
                    "  CPU {cpu} {}: {kib} KiB of its mappings in transparent huge pages{}",
                    l.set.level,
                    if kib == 0 {
                        " (none: its loads also pay 4 KiB pages' TLB misses)"
                    } else {
                        ""
                    }
                );
            }
        }
        let _ = writeln!(
            out,
            "  CPU {cpu}: cycle counter {:.3} GHz (against CLOCK_MONOTONIC_RAW); {} ticks of timing taken off each load; per round and level one untimed pass, {}then {} timed loads",
            job.clock.ticks_per_ns,
            job.overhead_ticks,
            match job.gap.is_zero() {
                true => String::new(),
                false => format!("{} ms idle, ", job.gap.as_millis()),
            },
            crate::measure::probes::CACHE_LOADS_PER_ROUND
        );
    }
}

fn attribution(out: &mut String, c: &CpuResult) {
    let cs = c
        .context_switches
        .map(|cs| format!("{} voluntary, {} involuntary", cs.voluntary, cs.involuntary))
        .unwrap_or_else(|| "unknown".into());
    // SMIs are the firmware's: no kernel counter shows them.
    let smis = c.smis.map(|n| format!("; SMIs {n}")).unwrap_or_default();
    let _ = writeln!(
        out,
        "  CPU {}: irqs {}; softirqs {}; context switches {cs}{smis}",
        c.cpu,
        deltas_line(&c.interrupts, 6),
        deltas_line(&c.softirqs, 4),
    );
    if let Some(t) = &c.threads_ran {
        let _ = writeln!(
            out,
            "  CPU {}: other threads ran {}",
            c.cpu,
            threads_line(t, 4)
        );
    }
    let first = c.hist.overflow_at();
    if !first.is_empty() {
        let shown: Vec<String> = first.iter().take(10).map(|i| i.to_string()).collect();
        let _ = writeln!(
            out,
            "  CPU {}: first overflows at samples {}{}",
            c.cpu,
            shown.join(" "),
            if first.len() > 10 { " ..." } else { "" }
        );
    }
}

/// `N (name runs, ...)`: how many other threads ran, the busiest named.
fn threads_line(t: &ThreadsRan, named: usize) -> String {
    if t.threads == 0 {
        return "0".into();
    }
    let busiest: Vec<String> = t
        .busiest
        .iter()
        .take(named)
        .map(|r| format!("{} {}×", crate::escape::terminal(&r.name), r.switches))
        .collect();
    let more = if (t.threads as usize) > busiest.len() {
        ", ..."
    } else {
        ""
    };
    format!(
        "{}, {} times ({}{more})",
        t.threads,
        t.switches,
        busiest.join(", ")
    )
}

/// The histogram of one probe in cyclictest's `-h` output format (the
/// format of `cyclictest -h N --histfile F`): one line per bucket
/// `%06d` followed by one `%06lu` count per thread (tab-separated), then
/// `# Total:`, `# Min Latencies:`, `# Avg Latencies:`, `# Max Latencies:`,
/// `# Histogram Overflows:` and `# Histogram Overflow at cycle number:`
/// with one `# Thread N:` line per CPU (thread N is the N-th measured CPU).
/// Values are whole microseconds truncated, as cyclictest computes them,
/// whatever the bucket width (bucket numbers are bucket indices).
pub fn cyclictest_histogram(p: &ProbeResult) -> String {
    let mut out = String::from("# Histogram\n");
    let hs: Vec<&Histogram> = p.cpus.iter().map(|c| &c.hist).collect();
    let buckets = p.all.counts().len();
    for i in 0..buckets {
        let _ = write!(out, "{i:06} ");
        let cols: Vec<String> = hs.iter().map(|h| format!("{:06}", h.counts()[i])).collect();
        out.push_str(&cols.join("\t"));
        out.push('\n');
    }
    let row = |out: &mut String, label: &str, w: usize, f: &dyn Fn(&Histogram) -> u64| {
        out.push_str(label);
        for h in &hs {
            let _ = write!(out, " {:0w$}", f(h));
        }
        out.push('\n');
    };
    row(&mut out, "# Total:", 9, &|h| h.counts().iter().sum());
    row(&mut out, "# Min Latencies:", 5, &|h| {
        h.min_ns().unwrap_or(0) / 1000
    });
    row(&mut out, "# Avg Latencies:", 5, &|h| h.cyclictest_avg_us());
    row(&mut out, "# Max Latencies:", 5, &|h| {
        h.max_ns().unwrap_or(0) / 1000
    });
    row(&mut out, "# Histogram Overflows:", 5, &|h| h.overflows());
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (t, h) in hs.iter().enumerate() {
        let _ = write!(out, "# Thread {t}:");
        for i in h.overflow_at() {
            let _ = write!(out, " {i:05}");
        }
        let kept = h.overflow_at().len() as u64;
        if kept < h.overflows() {
            let _ = write!(out, " # {:05} others", h.overflows() - kept);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Writes each ran probe's histogram to `path` (one probe) or
/// `path.PROBE` (several), in cyclictest's format.
pub fn write_histfiles(run: &Run, path: &Path) -> Result<(), MeasureError> {
    let ran: Vec<&ProbeResult> = run
        .probes
        .iter()
        .filter(|p| p.status == Status::Ok)
        .collect();
    for p in &ran {
        let target = if run.config.probes.len() == 1 {
            path.to_path_buf()
        } else {
            let mut s = path.as_os_str().to_owned();
            s.push(format!(".{}", p.probe.name()));
            s.into()
        };
        crate::durable::write_file(&target, cyclictest_histogram(p).as_bytes(), 0o644).map_err(
            |e| MeasureError::Output {
                path: e.path,
                source: e.source,
            },
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::testing::{hist, sample_run};

    #[test]
    fn cyclictest_format() {
        let run = sample_run();
        let text = cyclictest_histogram(&run.probes[0]);
        let expected = "# Histogram\n\
000000 000000\t000001\n\
000001 000001\t000001\n\
000002 000002\t000000\n\
000003 000001\t000000\n\
# Total: 000000004 000000002\n\
# Min Latencies: 00001 00000\n\
# Avg Latencies: 00003 00000\n\
# Max Latencies: 00009 00001\n\
# Histogram Overflows: 00001 00000\n\
# Histogram Overflow at cycle number:\n\
# Thread 0: 00004\n\
# Thread 1:\n\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn cyclictest_format_others() {
        let mut run = sample_run();
        run.probes[0].cpus.truncate(1);
        run.probes[0].cpus[0].hist = hist(&[5, 6, 7, 8, 9, 10, 0], 2);
        run.probes[0].all = Histogram::new(2, 1000);
        let text = cyclictest_histogram(&run.probes[0]);
        assert!(
            text.contains("# Thread 0: 00000 00001 # 00004 others\n"),
            "{text}"
        );
        assert!(text.ends_with("others\n\n"));
    }

    #[test]
    fn json_schema_shape() {
        let run = sample_run();
        let v: serde_json::Value = serde_json::from_str(&json(&run)).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["tool"]["name"], "cpushield");
        for key in [
            "machine",
            "config",
            "results",
            "started_unix_s",
            "interrupted",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["machine"]["clocksource"], "tsc");
        assert_eq!(v["config"]["cpus"], "1-2");
        assert_eq!(v["config"]["stop"]["loops"], 5);
        let r = &v["results"][0];
        assert_eq!(r["probe"], "timer");
        assert_eq!(r["status"], "ok");
        assert_eq!(r["sample"], "wakeup_latency");
        assert_eq!(r["histogram"]["bucket_width_ns"], 1000);
        assert_eq!(r["histogram"]["buckets"], 4);
        let c0 = &r["cpus"][0];
        assert_eq!(c0["cpu"], 1);
        assert_eq!(c0["histogram"], serde_json::json!([0, 1, 2, 1]));
        assert_eq!(c0["threads_ran"]["threads"], 1);
        assert_eq!(c0["threads_ran"]["busiest"][0]["name"], "kworker/1:1");
        assert_eq!(r["cpus"][1]["histogram"], serde_json::json!([1, 1]));
        assert_eq!((&c0["smis"], &r["cpus"][1]["smis"]), (&0.into(), &1.into()));
        let s = &c0["stats"];
        assert_eq!(s["samples"], 5);
        assert_eq!(s["min_ns"], 1400);
        assert_eq!(s["max_ns"], 9400);
        assert_eq!(s["overflows"], 1);
        assert_eq!(s["overflow_at"], serde_json::json!([4]));
        let ps: Vec<f64> = s["percentiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["p"].as_f64().unwrap())
            .collect();
        assert_eq!(ps, vec![50.0, 90.0, 99.0, 99.9, 99.99]);
        assert_eq!(s["percentiles"][0]["value_ns"], 3000);
        assert!(
            s["percentiles"][4]["value_ns"].is_null(),
            "p99.99 is an overflow"
        );
        assert_eq!(c0["interrupts"][0]["source"], "LOC");
        assert_eq!(c0["context_switches"]["voluntary"], 5);
        assert_eq!(r["all"]["samples"], 7);
        assert_eq!(r["all"]["overflow_at"], serde_json::json!([]));
    }

    #[test]
    fn human_table_is_aligned_with_units() {
        let text = human(&sample_run());
        assert!(text.contains("SCHED_FIFO 99"), "{text}");
        assert!(text.contains("values in µs"), "{text}");
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with(['1', '2', 'A', 'C']))
            .collect();
        let header = text.lines().find(|l| l.contains("samples")).unwrap();
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("ALL"))
            .unwrap();
        assert_eq!(header.chars().count(), row.chars().count(), "{lines:?}");
        assert!(text.contains(">4.0"), "p99.99 beyond range: {text}");
        assert!(text.contains("irqs LOC 7"), "{text}");
        assert!(
            text.contains("CPU 1: other threads ran 1, 3 times (kworker/1:1 3×)"),
            "{text}"
        );
        assert!(text.contains("first overflows at samples 4"), "{text}");
        assert!(text.contains("involuntary; SMIs 1\n"), "{text}");
    }

    /// A cache run on CPU 1: L1d loads at 2 ns (5 cycles), L3-share loads
    /// at 40 ns (100 cycles) with one evicted to 300 ns.
    fn cache_run() -> Option<Run> {
        use crate::measure::cache::working_sets;
        use crate::measure::probes::{CacheJob, CycleClock};
        let tsc = crate::sys::syscalls::Tsc::new().ok()?;
        let clock = CycleClock { ticks_per_ns: 2.5 };
        let mut sets = working_sets(1, &[]);
        sets.remove(1);
        let mut job = CacheJob::new(1, sets, tsc, clock, 100, 1);
        job.overhead_ticks = 30;
        let mut all = Histogram::new(100, 1);
        for (level, ns) in [(0, [2, 2, 2]), (1, [40, 40, 300])] {
            for (i, v) in ns.into_iter().enumerate() {
                job.levels[level].ns.record(i as u64, v);
                job.levels[level]
                    .cycles
                    .record(i as u64, (v as f64 * 2.5) as u64);
                all.record(i as u64, v);
            }
        }
        let mut run = sample_run();
        let p = &mut run.probes[0];
        p.probe = ProbeKind::Cache;
        p.interval_ns = None;
        p.cpus.truncate(1);
        p.cpus[0].hist = all.clone();
        p.cpus[0].cache = Some(job);
        p.all = all;
        Some(run)
    }

    #[test]
    fn cache_levels_are_tabled_in_ns_and_cycles() {
        let Some(run) = cache_run() else {
            return; // no counter on this architecture: the probe is skipped
        };
        let text = human(&run);
        assert!(text.contains("values in ns"), "{text}");
        let row = |level: &str| {
            text.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(level))
                .unwrap_or_else(|| panic!("no {level} row: {text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        // CPU level set samples min p50 p99 p99.9 max over | p50 p99 max;
        // percentiles are bucket upper edges clamped to the max, 100 ns
        // buckets and 300 cycle ones (the same time at 2.5 GHz, rounded up).
        assert_eq!(row("L1d"), "1 L1d 32 KiB 3 2 2 2 2 2 0 | 5 5 5");
        assert_eq!(
            row("L3"),
            "1 L3 2.0 MiB 3 40 41 >100 >100 300 1 | 101 >300 750"
        );
        assert!(text.contains("CPU 1 L3: no level-3 data cache"), "{text}");
        assert!(
            text.contains("cycle counter 2.500 GHz") && text.contains("30 ticks of timing"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&run)).unwrap();
        let r = &v["results"][0];
        assert_eq!(r["sample"], "load_latency");
        let c = &r["cpus"][0]["cache"];
        assert_eq!(c["timing_overhead_cycles"], 30);
        let l3 = &c["levels"][1];
        assert_eq!(l3["level"], "L3");
        assert_eq!(l3["source"], "assumed");
        assert_eq!(l3["bytes"], 2 << 20);
        assert_eq!(l3["stats"]["max_ns"], 300);
        assert_eq!(l3["cycles"]["p50"], 101);
        assert_eq!(l3["cycles"]["overflows"], 1);
        assert!(l3["cycles"]["p99"].is_null(), "an overflow");
        assert_eq!(l3["histogram"].as_array().unwrap().len(), 41, "trimmed");
    }

    #[test]
    fn skipped_probe_is_reported() {
        let mut run = sample_run();
        run.probes[0].status = Status::Skipped("no RTC".into());
        run.probes[0].probe = ProbeKind::Rtc;
        assert!(human(&run).contains("skipped: no RTC"));
        let v: serde_json::Value = serde_json::from_str(&json(&run)).unwrap();
        assert_eq!(v["results"][0]["status"], "skipped");
        assert_eq!(v["results"][0]["skip_reason"], "no RTC");
    }
}
