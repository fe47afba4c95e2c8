//! The tests an extrapolation must pass before it is believed: the
//! Anderson-Darling statistic of a fully specified distribution with its
//! p-value (Marsaglia and Marsaglia, 2004, "Evaluating the
//! Anderson-Darling distribution", J. Stat. Softw. 9(2)), the
//! Wald-Wolfowitz runs test about the median (independence), and the
//! two-sample Kolmogorov-Smirnov test (the same distribution in both
//! halves of a run).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// One test's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Test {
    /// The statistic (A², the runs' z, or D).
    pub statistic: f64,
    /// Its p-value: how likely a statistic at least this extreme is when
    /// the hypothesis holds.
    pub p_value: f64,
    /// The hypothesis is kept at [`LEVEL`].
    pub passed: bool,
}

/// The level below which a p-value rejects: the four checks an
/// extrapolation must pass (independence, the halves, the trend, the
/// held-out fit) share 5 % (Bonferroni), so that a clean run is refused
/// by chance about one time in twenty, not one in five.
pub const LEVEL: f64 = 0.05 / 4.0;

impl Test {
    pub(super) fn new(statistic: f64, p_value: f64) -> Test {
        let p_value = p_value.clamp(0.0, 1.0);
        Test {
            statistic,
            p_value,
            passed: p_value >= LEVEL,
        }
    }
}

/// The Anderson-Darling test of `xs` against the distribution function
/// `cdf`, fully specified (fitted on other data): A² and its p-value.
pub fn anderson_darling(xs: &[f64], cdf: impl Fn(f64) -> f64) -> Test {
    let n = xs.len();
    let mut u: Vec<f64> = xs
        .iter()
        .map(|&x| cdf(x).clamp(1e-300, 1.0 - 1e-16))
        .collect();
    u.sort_by(f64::total_cmp);
    let nf = n as f64;
    let s: f64 = (0..n)
        .map(|i| (2.0 * i as f64 + 1.0) * (u[i].ln() + (1.0 - u[n - 1 - i]).ln()))
        .sum();
    let a2 = -nf - s / nf;
    Test::new(a2, 1.0 - ad_cdf(n, a2))
}

/// P(A² < z) for a sample of `n` from a fully specified distribution:
/// Marsaglia and Marsaglia's asymptotic form and their correction for `n`.
pub fn ad_cdf(n: usize, z: f64) -> f64 {
    if z <= 0.0 {
        return 0.0;
    }
    let x = ad_inf(z);
    let n = n.max(1) as f64;
    let fix = if x > 0.8 {
        (-130.2137
            + (745.2337 - (1705.091 - (1950.646 - (1116.360 - 255.7844 * x) * x) * x) * x) * x)
            / n
    } else {
        let c = 0.01265 + 0.1757 / n;
        if x < c {
            let t = x / c;
            let t = t.sqrt() * (1.0 - t) * (49.0 * t - 102.0);
            t * (0.0037 / (n * n) + 0.00078 / n + 0.00006) / n
        } else {
            let t = (x - c) / (0.8 - c);
            let t = -0.00022633
                + (6.54034 - (14.6538 - (14.458 - (8.259 - 1.91864 * t) * t) * t) * t) * t;
            t * (0.04213 / n + 0.01365 / (n * n)) / n
        }
    };
    (x + fix).clamp(0.0, 1.0)
}

/// The limit of P(A² < z) as n grows (Marsaglia and Marsaglia's `adinf`).
fn ad_inf(z: f64) -> f64 {
    if z < 2.0 {
        (-1.2337141 / z).exp() / z.sqrt()
            * (2.00012
                + (0.247105 - (0.0649821 - (0.0347962 - (0.011672 - 0.00168691 * z) * z) * z) * z)
                    * z)
    } else {
        (-(1.0776
            - (2.30695 - (0.43424 - (0.082433 - (0.008056 - 0.0003146 * z) * z) * z) * z) * z)
            .exp())
        .exp()
    }
}

/// The Wald-Wolfowitz runs test of independence on `xs` in time order:
/// values above and below the median (those equal to it left out), the
/// number of runs against its mean and variance under independence, and
/// the two-sided normal p-value. Too few on either side: not testable,
/// passed with p-value 1.
pub fn runs(xs: &[f64]) -> Test {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let Some(median) = median_of(&sorted) else {
        return Test::new(0.0, 1.0);
    };
    let signs: Vec<bool> = xs
        .iter()
        .filter(|&&x| x != median)
        .map(|&x| x > median)
        .collect();
    let above = signs.iter().filter(|&&s| s).count() as f64;
    let below = signs.len() as f64 - above;
    if above < 2.0 || below < 2.0 {
        return Test::new(0.0, 1.0);
    }
    let runs = 1 + signs.windows(2).filter(|w| w[0] != w[1]).count();
    let total = above + below;
    let mean = 2.0 * above * below / total + 1.0;
    let var = 2.0 * above * below * (2.0 * above * below - total) / (total * total * (total - 1.0));
    let z = (runs as f64 - mean) / var.sqrt();
    Test::new(z, 2.0 * (1.0 - standard_normal().cdf(z.abs())))
}

fn median_of(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

fn standard_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal is valid")
}

/// The two-sample Kolmogorov-Smirnov test that `a` and `b` come from one
/// distribution: D, the largest gap between their empirical distribution
/// functions, and its asymptotic p-value with Stephens' correction for
/// the effective size (`Q_KS((√nₑ + 0.12 + 0.11/√nₑ)·D)`).
pub fn two_sample_ks(a: &[f64], b: &[f64]) -> Test {
    if a.is_empty() || b.is_empty() {
        return Test::new(0.0, 1.0);
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / na - j as f64 / nb).abs());
    }
    let ne = (na * nb / (na + nb)).sqrt();
    Test::new(d, kolmogorov_q((ne + 0.12 + 0.11 / ne) * d))
}

/// The Kolmogorov distribution's upper tail,
/// `Q(λ) = 2 Σ (−1)^(j−1) exp(−2 j² λ²)`.
pub fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let mut sum = 0.0;
    for j in 1..=100 {
        let term = (-2.0 * (j * j) as f64 * lambda * lambda).exp();
        sum += if j % 2 == 1 { term } else { -term };
        if term < 1e-16 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

/// The KPSS test of level stationarity (Kwiatkowski, Phillips, Schmidt
/// and Shin, 1992) on the ranks of `xs` in time order, so that a few
/// large maxima do not decide it: `η = Σ Sₜ² / (T² σ̂²)`, `Sₜ` the partial
/// sums of the deviations from the mean, `σ̂²` the long-run variance with
/// Newey-West (Bartlett) weights up to lag `⌊4 (T/100)^¼⌋`. A drift
/// through the run makes η large. The p-value interpolates the limit
/// distribution's published quantiles (50 %: 0.119, 90 %: 0.347, 95 %:
/// 0.463, 97.5 %: 0.574, 99 %: 0.739). Fewer than 10 values: not
/// testable, passed with p-value 1.
pub fn kpss_ranks(xs: &[f64]) -> Test {
    let n = xs.len();
    if n < 10 {
        return Test::new(0.0, 1.0);
    }
    let ranks = ranks(xs);
    let mean = ranks.iter().sum::<f64>() / n as f64;
    let e: Vec<f64> = ranks.iter().map(|r| r - mean).collect();
    let mut partial = 0.0;
    let mut sum_sq = 0.0;
    for d in &e {
        partial += d;
        sum_sq += partial * partial;
    }
    let lags = (4.0 * (n as f64 / 100.0).powf(0.25)).floor() as usize;
    let gamma = |k: usize| e[k..].iter().zip(&e).map(|(a, b)| a * b).sum::<f64>() / n as f64;
    let long_run = gamma(0)
        + 2.0
            * (1..=lags.min(n - 1))
                .map(|k| (1.0 - k as f64 / (lags as f64 + 1.0)) * gamma(k))
                .sum::<f64>();
    if long_run <= 0.0 {
        return Test::new(0.0, 1.0);
    }
    let eta = sum_sq / ((n * n) as f64 * long_run);
    Test::new(eta, kpss_p_value(eta))
}

/// The upper tail of the KPSS level statistic's limit distribution,
/// interpolated between its published quantiles (log-linear beyond 99 %).
pub fn kpss_p_value(eta: f64) -> f64 {
    const TABLE: [(f64, f64); 6] = [
        (0.0, 1.0),
        (0.119, 0.5),
        (0.347, 0.10),
        (0.463, 0.05),
        (0.574, 0.025),
        (0.739, 0.01),
    ];
    for w in TABLE.windows(2) {
        let ((x0, p0), (x1, p1)) = (w[0], w[1]);
        if eta <= x1 {
            return p0 + (p1 - p0) * (eta - x0) / (x1 - x0);
        }
    }
    // Past 99 %: the tail falls about tenfold every 0.5 of η.
    (0.01 * 10f64.powf(-(eta - 0.739) / 0.5)).max(1e-6)
}

/// Ranks 1..n of `xs` (ties take their mean rank).
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = rank;
        }
        i = j + 1;
    }
    r
}
