//! `certify --from` on synthetic runs drawn from known distributions with
//! fixed seeds: each case gets the verdict an honest tool gives, read
//! from the exit code and certify.json (0 PASS, 10 FAIL, 11 INCONCLUSIVE).
//! Nothing is measured or changed: the binary only reads the file.

use std::path::{Path, PathBuf};
use std::process::Command;

use cpushield::certify::evt::Gev;
use serde_json::{json, Value};

const PASS: i32 = 0;
const FAIL: i32 = 10;
const INCONCLUSIVE: i32 = 11;

/// Samples a second at 1 kHz.
const PER_SECOND: u64 = 1000;

/// One CPU's run as the verdict reads it: 1 µs buckets, each second's
/// body at 2 µs and its largest sample where `maxima` puts it.
struct Run {
    counts: Vec<u64>,
    per_second: Vec<u64>,
    missed: u64,
}

impl Run {
    fn from_maxima(maxima: &[f64]) -> Run {
        let mut run = Run {
            counts: vec![0; 3],
            per_second: Vec::new(),
            missed: 0,
        };
        for &m in maxima {
            let m = (m.max(3_000.0)) as u64;
            run.counts[2] += PER_SECOND - 1;
            run.add(m);
            run.per_second.push(m);
        }
        run
    }

    fn add(&mut self, ns: u64) {
        let b = (ns / 1000) as usize;
        if self.counts.len() <= b {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
    }

    /// Replaces `n` body samples of second `s` by one `ns` late, with
    /// the deadlines a 1 ms timer skips after it.
    fn stall(&mut self, s: usize, ns: u64) {
        self.counts[2] -= 1;
        self.add(ns);
        self.missed += (ns - 1) / 1_000_000;
        self.per_second[s] = self.per_second[s].max(ns);
    }

    fn max(&self) -> u64 {
        *self.per_second.iter().max().unwrap()
    }

    fn json(&self) -> Value {
        let samples: u64 = self.counts.iter().sum();
        json!({
            "tails": [{
                "cpu": 3,
                "width_ns": 1000,
                "buckets": 100_000,
                "counts": self.counts,
                "overflows": 0,
                "samples": samples,
                "max_ns": self.max(),
                "per_second_max_ns": self.per_second,
                "elapsed_s": self.per_second.len() as f64,
                "missed": self.missed,
                "interval_ns": 1_000_000,
                "skipped": "after_late_sample",
            }]
        })
    }
}

fn gev(mu_us: f64, sigma_us: f64, xi: f64) -> Gev {
    Gev {
        mu: mu_us * 1000.0,
        sigma: sigma_us * 1000.0,
        xi,
    }
}

fn maxima(g: &Gev, seconds: usize, seed: u64) -> Vec<f64> {
    g.sample(seconds, &mut fastrand::Rng::with_seed(seed))
}

/// Writes `run` into `dir/name.json`, runs `certify --from` on it with
/// `args`, and gives the exit code and certify.json.
fn certify(dir: &Path, name: &str, run: &Value, args: &[&str]) -> (i32, Value) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, run.to_string()).unwrap();
    let out = dir.join(name);
    let status = Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .arg("certify")
        .arg("--from")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    let code = status.status.code().unwrap();
    let report = std::fs::read_to_string(out.join("certify.json"))
        .unwrap_or_else(|_| panic!("{name}: {}", String::from_utf8_lossy(&status.stderr)));
    (code, serde_json::from_str(&report).unwrap())
}

fn budget(b: &str) -> [&str; 2] {
    ["--budget", b]
}

fn why(report: &Value, term: usize) -> String {
    report["verdict"]["terms"][term]["cpus"][0]["why"]
        .as_str()
        .unwrap()
        .to_string()
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_path_buf();
    (d, p)
}

#[test]
fn a_light_tail_with_the_bound_just_above_its_largest_sample_never_passes() {
    let (_d, dir) = temp();
    let g = gev(20.0, 1.0, -0.1);
    for seed in 0..100 {
        let run = Run::from_maxima(&maxima(&g, 120, seed));
        let b = format!("max<={}ns", run.max() + 1);
        let (code, r) = certify(&dir, &format!("s{seed}"), &run.json(), &budget(&b));
        assert_eq!(code, INCONCLUSIVE, "seed {seed}: {}", why(&r, 0));
    }
}

#[test]
fn a_level_shift_half_way_is_not_extrapolated() {
    let (_d, dir) = temp();
    let mut m = maxima(&gev(20.0, 1.0, -0.1), 300, 1);
    m.extend(maxima(&gev(24.0, 1.0, -0.1), 300, 2));
    let run = Run::from_maxima(&m);
    let b = format!("max<={}ns", run.max() * 105 / 100);
    let (code, r) = certify(&dir, "shift", &run.json(), &budget(&b));
    assert_eq!(code, INCONCLUSIVE, "{}", why(&r, 0));
    assert!(
        why(&r, 0).contains("nothing extrapolated"),
        "{}",
        why(&r, 0)
    );
}

#[test]
fn a_heavy_tail_with_the_bound_five_percent_above_its_largest_sample_is_inconclusive() {
    let (_d, dir) = temp();
    let run = Run::from_maxima(&maxima(&gev(20.0, 2.0, 0.47), 600, 3));
    let b = format!("max<={}ns", run.max() * 105 / 100);
    let (code, r) = certify(&dir, "heavy", &run.json(), &budget(&b));
    assert_eq!(code, INCONCLUSIVE, "{}", why(&r, 0));
    let w = why(&r, 0);
    assert!(
        w.contains("is 4.8 % below it") || w.contains("% below it"),
        "{w}"
    );
    assert!(w.contains("to decide:"), "{w}");
}

#[test]
fn a_thirty_second_run_cannot_pass_a_max_term() {
    let (_d, dir) = temp();
    let run = Run::from_maxima(&maxima(&gev(20.0, 1.0, -0.1), 30, 4));
    let (code, r) = certify(&dir, "short", &run.json(), &budget("max<=100us"));
    assert_eq!(code, INCONCLUSIVE, "{}", why(&r, 0));
    assert!(
        why(&r, 0).contains("a run of at least 60 s"),
        "{}",
        why(&r, 0)
    );
}

#[test]
fn a_max_term_is_never_better_than_a_percentile_with_the_same_bound() {
    let (_d, dir) = temp();
    let rank = |c: i32| match c {
        PASS => 0,
        INCONCLUSIVE => 1,
        _ => 2,
    };
    for seed in 0..3 {
        let run = Run::from_maxima(&maxima(&gev(20.0, 1.0, -0.1), 300, 10 + seed));
        for pct in [101u64, 110, 150] {
            let bound = run.max() * pct / 100;
            let b = format!("max<={bound}ns,p99.9999<={bound}ns");
            let (_, r) = certify(&dir, &format!("m{seed}-{pct}"), &run.json(), &budget(&b));
            let outcome = |t: usize| match r["verdict"]["terms"][t]["outcome"].as_str().unwrap() {
                "PASS" => PASS,
                "FAIL" => FAIL,
                _ => INCONCLUSIVE,
            };
            assert!(
                rank(outcome(0)) >= rank(outcome(1)),
                "seed {seed}, {pct} %: max {} better than p99.9999 {}",
                why(&r, 0),
                why(&r, 1)
            );
        }
    }
}

#[test]
fn deadlines_skipped_after_stalls_are_late_too() {
    let (_d, dir) = temp();
    // 600 s at 1 kHz, 10 stalls of 20.5 ms: 10 late samples and 200
    // skipped deadlines, against at most 1 in 10,000 over 50 µs.
    let mut run = Run::from_maxima(&vec![10_000.0; 600]);
    for k in 0..10 {
        run.stall(30 + 60 * k, 20_500_000);
    }
    assert_eq!(run.missed, 200);
    let (code, r) = certify(&dir, "stalls", &run.json(), &budget("p99.99<=50us"));
    assert_eq!(code, FAIL, "{}", why(&r, 0));
    let c = &r["verdict"]["terms"][0]["cpus"][0];
    assert_eq!(c["exceedances"], json!([210, 210]));
    assert_eq!(c["skipped_over"], json!([200, 200]));
    assert!(
        why(&r, 0).contains("200 of them skipped after a stall"),
        "{}",
        why(&r, 0)
    );
}

#[test]
fn thirty_late_deadlines_in_three_bursts_do_not_pass() {
    let (_d, dir) = temp();
    let mut run = Run::from_maxima(&vec![10_000.0; 600]);
    for s in [100, 300, 500] {
        for _ in 0..10 {
            run.counts[2] -= 1;
            run.add(80_000);
        }
        run.per_second[s] = 80_000;
    }
    let (code, r) = certify(&dir, "bursts", &run.json(), &budget("p99.99<=50us"));
    assert_ne!(code, PASS, "{}", why(&r, 0));
    let c = &r["verdict"]["terms"][0]["cpus"][0];
    assert_eq!(c["clusters"]["clusters"], 3);
    assert!(
        why(&r, 0).contains("in 3 clusters (extremal index 0.10"),
        "{}",
        why(&r, 0)
    );
    // The same 30, each on its own, pass: 30 in 600,000 is within 1e-4.
    let mut spread = Run::from_maxima(&vec![10_000.0; 600]);
    for k in 0..30 {
        spread.counts[2] -= 1;
        spread.add(80_000);
        spread.per_second[k * 20] = 80_000;
    }
    let (code, r) = certify(&dir, "spread", &spread.json(), &budget("p99.99<=50us"));
    assert_eq!(code, PASS, "{}", why(&r, 0));
}

#[test]
fn a_rare_mode_the_run_never_saw_is_not_called_impossible() {
    let (_d, dir) = temp();
    // Per-second maxima of a light body; a mode at 500 µs one second in
    // a billion never shows in 600 s.
    let mut rng = fastrand::Rng::with_seed(5);
    let body = gev(20.0, 1.0, -0.1);
    let m: Vec<f64> = (0..600)
        .map(|_| {
            if rng.f64() < 1e-9 {
                500_000.0
            } else {
                body.sample(1, &mut rng)[0]
            }
        })
        .collect();
    let run = Run::from_maxima(&m);
    let (_, r) = certify(&dir, "rare", &run.json(), &budget("max<=100us"));
    let w = why(&r, 0);
    assert!(!w.contains("1e-12") && !w.contains("less than"), "{w}");
    assert!(w.contains("a rarer mode"), "{w}");
}

#[test]
fn two_runs_of_one_heavy_tailed_machine_are_no_regression() {
    let (_d, dir) = temp();
    let g = gev(20.0, 2.0, 0.47);
    let mut alarms = 0;
    for seed in 0..100 {
        let then = Run::from_maxima(&maxima(&g, 300, 1000 + seed));
        let now = Run::from_maxima(&maxima(&g, 300, 5000 + seed));
        let b = budget("p99.9<=30us");
        let (_, _) = certify(&dir, &format!("then{seed}"), &then.json(), &b);
        let base = dir.join(format!("then{seed}"));
        let base = base.to_str().unwrap();
        let (_, r) = certify(
            &dir,
            &format!("now{seed}"),
            &now.json(),
            &["--budget", "p99.9<=30us", "--baseline", base],
        );
        let changes = r["baseline"]["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 2, "the term and the per-second maxima");
        if changes.iter().any(|c| c["regression"] == true) {
            alarms += 1;
        }
    }
    assert!(
        alarms <= 5,
        "{alarms} of 100 unchanged pairs called a regression"
    );
}

#[test]
fn a_clearly_worse_run_is_a_regression() {
    let (_d, dir) = temp();
    let then = Run::from_maxima(&maxima(&gev(20.0, 2.0, 0.1), 300, 1));
    let now = Run::from_maxima(&maxima(&gev(26.0, 2.0, 0.1), 300, 2));
    let (_, _) = certify(&dir, "then", &then.json(), &budget("p99.9<=30us"));
    let base = dir.join("then");
    let (code, r) = certify(
        &dir,
        "now",
        &now.json(),
        &[
            "--budget",
            "p99.9<=30us",
            "--baseline",
            base.to_str().unwrap(),
        ],
    );
    assert_eq!(code, FAIL, "{}", r["run"]);
    assert!(r["run"]["reasons"][0]
        .as_str()
        .unwrap()
        .starts_with("regression against the baseline"));
}

#[test]
fn what_holds_still_passes() {
    let (_d, dir) = temp();
    // A light tail, the bound far above, ten minutes.
    let run = Run::from_maxima(&maxima(&gev(20.0, 1.0, -0.1), 600, 6));
    let (code, r) = certify(&dir, "far", &run.json(), &budget("max<=60us"));
    assert_eq!(code, PASS, "{}", why(&r, 0));
    // 600,000 deadlines, none over 50 µs: p99.99 is shown at 95 %.
    let (code, r) = certify(&dir, "p9999", &run.json(), &budget("p99.99<=50us"));
    assert_eq!(code, PASS, "{}", why(&r, 0));
    // The JUnit file carries the same outcome, with the run's own case.
    let xml = std::fs::read_to_string(dir.join("p9999/junit.xml")).unwrap();
    assert!(
        xml.contains("tests=\"2\" failures=\"0\" skipped=\"0\""),
        "{xml}"
    );
}

#[test]
fn a_file_certify_cannot_read_is_refused_by_name_and_nothing_is_written() {
    let (_d, dir) = temp();
    let file = dir.join("nonsense.json");
    std::fs::write(&file, "{\"hello\": 1}").unwrap();
    let out = dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .args(["certify", "--budget", "max<=1ms", "--from"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nonsense.json") && err.contains("results.json"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn a_target_over_the_mission_gives_the_latency_at_it() {
    let (_d, dir) = temp();
    // A light tail that ends near 30 µs (μ 20, σ 1, ξ −0.1).
    let run = Run::from_maxima(&maxima(&gev(20.0, 1.0, -0.1), 600, 6));
    let args = [
        "--budget",
        "max<=60us",
        "--target",
        "1e-9",
        "--mission",
        "10h",
    ];
    let (code, r) = certify(&dir, "target-far", &run.json(), &args);
    assert_eq!(code, PASS, "{}", why(&r, 0));
    let pw = &r["verdict"]["terms"][0]["cpus"][0]["tail"]["pwcet"];
    let (x, up) = (
        pw["latency_ns"].as_f64().unwrap(),
        pw["upper_ns"].as_f64().unwrap(),
    );
    assert!(x >= run.max() as f64 && x <= up && up < 60_000.0, "{pw}");
    assert!(
        why(&r, 0).contains("against the target of at most 1.0e-9 over 36000 s"),
        "{}",
        why(&r, 0)
    );
    assert!(why(&r, 0).contains("(pWCET)"), "{}", why(&r, 0));
    // A bound under the latency at the target: not shown.
    let b = format!(
        "max<={}ns",
        (x as u64).saturating_sub(500).max(run.max() + 1)
    );
    let args = ["--budget", &b, "--target", "1e-9", "--mission", "10h"];
    let (code, r) = certify(&dir, "target-close", &run.json(), &args);
    assert_eq!(code, INCONCLUSIVE, "{}", why(&r, 0));
    assert!(
        why(&r, 0).contains("the target is not shown"),
        "{}",
        why(&r, 0)
    );
    // Per activation.
    let args = ["--budget", "max<=60us", "--target", "1e-12/activation"];
    let (code, r) = certify(&dir, "target-act", &run.json(), &args);
    assert_eq!(code, PASS, "{}", why(&r, 0));
    assert!(why(&r, 0).contains("per activation"), "{}", why(&r, 0));
}
