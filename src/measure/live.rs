//! What the main thread does while the measuring threads run: every
//! second it takes each CPU's largest sample of that second; on request
//! it asks the threads for copies of their histograms, from which it
//! writes a checkpoint (`--checkpoint`, every minute) and the progress
//! line's percentiles and exceedances (on a terminal, every few seconds).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::args::{ProbeKind, Stop};
use super::histogram::{Histogram, Summary};
use super::progress::Progress;
use crate::durable::{write_atomic, DurableError};

/// How often a checkpoint is written.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(60);

/// How often the progress line's percentiles are refreshed on a terminal.
const PERCENTILES_EVERY: Duration = Duration::from_secs(2);

/// How long after asking for copies they are read: a thread that has not
/// taken a sample by then (a long period) is left out of that round.
const COPY_WAIT: Duration = Duration::from_millis(500);

/// Version of the checkpoint file's layout.
pub const CHECKPOINT_VERSION: u32 = 1;

/// What a checkpoint file holds: the run so far, per CPU in
/// `results.json`'s terms, replaced whole each minute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Layout version of this file.
    pub checkpoint_version: u32,
    /// The probe measuring.
    pub probe: String,
    /// Seconds measured when the copies were taken.
    pub elapsed_s: f64,
    /// Bucket width of every histogram, ns.
    pub bucket_width_ns: u64,
    /// Buckets of every histogram (samples past them are overflows);
    /// absent: as many as the longest histogram holds.
    #[serde(default)]
    pub buckets: Option<usize>,
    /// The probe's period, ns, when it has one; absent: not recorded.
    #[serde(default)]
    pub interval_ns: Option<u64>,
    /// Each measured CPU.
    pub cpus: Vec<CpuCheckpoint>,
}

/// One CPU in a [`Checkpoint`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuCheckpoint {
    /// The CPU number.
    pub cpu: u32,
    /// Its statistics at the copy; `None` when its thread took no sample
    /// in time to be copied (the histogram is then empty too).
    pub stats: Option<Summary>,
    /// Bucket counts at the copy, trailing zero buckets omitted.
    pub histogram: Vec<u64>,
    /// The largest sample of each whole second so far, ns.
    pub per_second_max_ns: Vec<u64>,
    /// Deadlines skipped after a stall so far; absent: not recorded (the
    /// timer probe's are rebuilt from the histogram).
    #[serde(default)]
    pub missed_periods: Option<u64>,
}

/// A CPU's figures for the progress line, from its latest copy.
#[derive(Debug, Clone, Default)]
struct Figures {
    p99_ns: Option<u64>,
    p9999_ns: Option<u64>,
    over: Vec<u64>,
}

/// The main thread's work between the measuring threads' start and stop.
pub(super) struct Live<'a> {
    probe: ProbeKind,
    stop: Stop,
    cpus: &'a [u32],
    progress: &'a [Progress],
    width_ns: u64,
    over_ns: &'a [u64],
    checkpoint: Option<PathBuf>,
    tty: bool,
    per_second: Vec<Vec<u64>>,
    next_second: Duration,
    next_copy: Duration,
    asked: Option<(Instant, Duration)>,
    next_checkpoint: Duration,
    writer: Option<JoinHandle<Result<(), DurableError>>>,
    figures: Vec<Figures>,
    last_print: Instant,
    /// The first checkpoint that could not be written.
    pub failed: Option<DurableError>,
}

impl<'a> Live<'a> {
    /// Before the threads start: prepares their copies when a checkpoint
    /// or a progress line will ask for them.
    pub fn new(
        (probe, stop): (ProbeKind, Stop),
        cpus: &'a [u32],
        progress: &'a [Progress],
        (buckets, width_ns): (usize, u64),
        over_ns: &'a [u64],
        checkpoint: Option<PathBuf>,
    ) -> Live<'a> {
        let tty = std::io::stderr().is_terminal();
        if tty || checkpoint.is_some() {
            for p in progress {
                p.prepare_copy(buckets, width_ns);
            }
        }
        Live {
            probe,
            stop,
            cpus,
            progress,
            width_ns,
            over_ns,
            checkpoint,
            tty,
            per_second: vec![Vec::new(); progress.len()],
            next_second: Duration::from_secs(1),
            next_copy: if tty {
                PERCENTILES_EVERY
            } else {
                CHECKPOINT_EVERY
            },
            asked: None,
            next_checkpoint: CHECKPOINT_EVERY,
            writer: None,
            figures: vec![Figures::default(); progress.len()],
            last_print: Instant::now(),
            failed: None,
        }
    }

    /// One look, `elapsed` into the run.
    pub fn tick(&mut self, elapsed: Duration) {
        if elapsed >= self.next_second {
            self.next_second += Duration::from_secs(1);
            for (maxima, p) in self.per_second.iter_mut().zip(self.progress) {
                maxima.push(p.take_window_max());
            }
        }
        let copies_wanted = self.tty || self.checkpoint.is_some();
        if copies_wanted && self.asked.is_none() && elapsed >= self.next_copy {
            let every = if self.tty {
                PERCENTILES_EVERY
            } else {
                CHECKPOINT_EVERY
            };
            self.next_copy = elapsed + every;
            self.progress.iter().for_each(Progress::ask_copy);
            self.asked = Some((Instant::now(), elapsed));
        }
        if let Some((at, asked_at)) = self.asked {
            if at.elapsed() >= COPY_WAIT {
                self.asked = None;
                self.read_copies(asked_at);
            }
        }
        if self.tty && self.last_print.elapsed() >= Duration::from_millis(250) {
            self.last_print = Instant::now();
            eprint!("\r\x1b[K{}", self.line(elapsed));
        }
    }

    /// The per-second maxima, the last checkpoint written, and the line
    /// cleared.
    pub fn finish(mut self) -> (Vec<Vec<u64>>, Option<DurableError>) {
        self.join_writer();
        if self.tty {
            eprint!("\r\x1b[K");
        }
        (self.per_second, self.failed)
    }

    fn read_copies(&mut self, asked_at: Duration) {
        let width = self.width_ns;
        // The statistics, counts and maxima are gathered only for a
        // checkpoint that is due, not for each refresh of the line.
        let due = self.checkpoint.is_some() && asked_at >= self.next_checkpoint;
        let mut cpus = Vec::new();
        for (k, p) in self.progress.iter().enumerate() {
            let over_ns = self.over_ns;
            let copy = p.with_copy(|h| {
                let fig = Figures {
                    p99_ns: h.percentile(99.0),
                    p9999_ns: h.percentile(99.99),
                    over: over_ns.iter().map(|&b| over(h, b)).collect(),
                };
                (fig, due.then(|| (h.summary(), trimmed(h.counts()))))
            });
            let kept = copy.and_then(|(fig, kept)| {
                self.figures[k] = fig;
                kept
            });
            if due {
                let (stats, histogram) = kept.map_or((None, Vec::new()), |(s, h)| (Some(s), h));
                cpus.push(CpuCheckpoint {
                    cpu: self.cpus[k],
                    stats,
                    histogram,
                    per_second_max_ns: self.per_second[k].clone(),
                    missed_periods: None,
                });
            }
        }
        let (true, Some(path)) = (due, self.checkpoint.clone()) else {
            return;
        };
        self.next_checkpoint = asked_at + CHECKPOINT_EVERY;
        let cp = Checkpoint {
            checkpoint_version: CHECKPOINT_VERSION,
            probe: self.probe.name().to_string(),
            elapsed_s: asked_at.as_secs_f64(),
            bucket_width_ns: width,
            buckets: None,
            interval_ns: None,
            cpus,
        };
        self.join_writer();
        let data = serde_json::to_vec(&cp).expect("a checkpoint serialises");
        // fsync can take long: the write goes on a thread of its own, so
        // that the per-second maxima keep their seconds meanwhile.
        self.writer = Some(std::thread::spawn(move || write_atomic(&path, &data)));
    }

    fn join_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            if let Ok(Err(e)) = w.join() {
                self.failed.get_or_insert(e);
            }
        }
    }

    fn line(&self, t: Duration) -> String {
        let total = match self.stop {
            Stop::Duration(d) => format!("/{:.0} s", d.as_secs_f64()),
            Stop::Loops(n) => format!(" ({n} loops)"),
        };
        let mut line = format!("{} {:.0}{}", self.probe.name(), t.as_secs_f64(), total);
        let unit_ns = matches!(self.probe, ProbeKind::Gtod | ProbeKind::Cache);
        let show = |ns: u64| {
            if unit_ns {
                format!("{ns} ns")
            } else {
                format!("{:.1} µs", ns as f64 / 1000.0)
            }
        };
        for ((cpu, p), fig) in self
            .cpus
            .iter()
            .zip(self.progress)
            .zip(&self.figures)
            .take(8)
        {
            line.push_str(&format!(
                "  cpu{cpu}: {} max {}",
                p.samples.load(std::sync::atomic::Ordering::Relaxed),
                show(p.max_ns.load(std::sync::atomic::Ordering::Relaxed))
            ));
            if let (Some(a), Some(b)) = (fig.p99_ns, fig.p9999_ns) {
                line.push_str(&format!(" p99 {} p99.99 {}", show(a), show(b)));
            }
            for (bound, n) in self.over_ns.iter().zip(&fig.over) {
                line.push_str(&format!(" >{}: {n}", show(*bound)));
            }
        }
        line
    }
}

/// Samples of `h` certainly over `bound_ns`: those in buckets that start
/// past it, and the overflows when the range reaches past it (the count
/// certify's verdict calls "at least").
fn over(h: &Histogram, bound_ns: u64) -> u64 {
    let w = h.width_ns();
    let first = (bound_ns / w + 1) as usize;
    let in_range = h.counts().iter().skip(first).sum::<u64>();
    let range_end = h.counts().len() as u64 * w;
    in_range
        + if range_end > bound_ns {
            h.overflows()
        } else {
            0
        }
}

/// `counts` without its trailing zero buckets.
fn trimmed(counts: &[u64]) -> Vec<u64> {
    let end = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
    counts[..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceedances_count_whole_buckets_past_the_bound_and_overflows() {
        let mut h = Histogram::new(100, 1000);
        for (i, us) in [10u64, 49, 50, 51, 99, 500].into_iter().enumerate() {
            h.record(i as u64, us * 1000);
        }
        // bucket 50 holds [50, 51) µs: its sample may be 50.0 µs, not over
        assert_eq!(over(&h, 50_000), 3);
        assert_eq!(
            over(&h, 49_500),
            4,
            "only the bucket holding the bound is left out"
        );
        assert_eq!(over(&h, 98_000), 2);
        assert_eq!(
            over(&h, 100_000),
            0,
            "an overflow past the range may be under the bound"
        );
        assert_eq!(trimmed(h.counts()).len(), 100);
        assert_eq!(trimmed(&[1, 0, 2, 0, 0]), vec![1, 0, 2]);
        assert!(trimmed(&[0, 0]).is_empty());
    }

    #[test]
    fn a_checkpoint_is_written_whole_from_the_threads_copies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.json");
        let progress = [Progress::default()];
        let mut live = Live::new(
            (ProbeKind::Timer, Stop::Duration(Duration::from_secs(120))),
            &[3],
            &progress,
            (100, 1000),
            &[],
            Some(path.clone()),
        );
        live.tty = false;
        let mut h = Histogram::new(100, 1000);
        h.record(0, 7_500);
        progress[0]
            .window_max_ns
            .store(7_500, std::sync::atomic::Ordering::Relaxed);
        live.tick(Duration::from_secs(1));
        live.tick(CHECKPOINT_EVERY);
        progress[0].offer(&h);
        live.asked = live.asked.map(|(at, e)| (at - COPY_WAIT, e));
        live.tick(CHECKPOINT_EVERY + Duration::from_millis(20));
        let (maxima, failed) = live.finish();
        assert!(failed.is_none());
        let cp: Checkpoint = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(cp.elapsed_s, 60.0);
        assert_eq!(cp.cpus[0].cpu, 3);
        assert_eq!(cp.cpus[0].stats.as_ref().unwrap().max_ns, Some(7_500));
        assert_eq!(cp.cpus[0].histogram, vec![0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(cp.cpus[0].per_second_max_ns[0], 7_500);
        assert_eq!(maxima[0], cp.cpus[0].per_second_max_ns);
    }
}
