//! The generalised extreme-value distribution and its fits to block
//! maxima: probability-weighted moments (Hosking, Wallis and Wood, 1985)
//! for a start, then maximum likelihood (Coles, 2001, §3.3) by a
//! Nelder-Mead search from that start.
//!
//! The parameterisation is Coles': `F(x) = exp(−[1 + ξ(x − μ)/σ]^(−1/ξ))`,
//! where a shape `ξ > 0` is a heavy (Fréchet) tail with no upper end,
//! `ξ < 0` a bounded (Weibull) one ending at `μ − σ/ξ`, and `ξ = 0` the
//! Gumbel limit `exp(−exp(−(x − μ)/σ))`.

use serde::{Deserialize, Serialize};
use statrs::function::gamma::gamma;

use super::simplex;

/// Below this |ξ| the Gumbel limit is used (the general form loses
/// precision there).
const GUMBEL_XI: f64 = 1e-7;

/// A GEV distribution: location `mu`, scale `sigma` (> 0), shape `xi`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gev {
    /// Location μ.
    pub mu: f64,
    /// Scale σ.
    pub sigma: f64,
    /// Shape ξ (Coles' sign: > 0 heavy tail).
    pub xi: f64,
}

impl Gev {
    /// `t(x) = 1 + ξ(x − μ)/σ` (the Gumbel case has none: `None`).
    fn t(&self, x: f64) -> Option<f64> {
        (self.xi.abs() >= GUMBEL_XI).then(|| 1.0 + self.xi * (x - self.mu) / self.sigma)
    }

    /// The distribution function F(x).
    pub fn cdf(&self, x: f64) -> f64 {
        match self.t(x) {
            None => (-(-(x - self.mu) / self.sigma).exp()).exp(),
            Some(t) if t <= 0.0 => {
                if self.xi > 0.0 {
                    0.0
                } else {
                    1.0
                }
            }
            Some(t) => (-t.powf(-1.0 / self.xi)).exp(),
        }
    }

    /// The probability that one block maximum exceeds `x`, `1 − F(x)`,
    /// computed without the cancellation of `1 − F` when F is near 1.
    pub fn exceedance(&self, x: f64) -> f64 {
        let y = match self.t(x) {
            None => (-(x - self.mu) / self.sigma).exp(),
            Some(t) if t <= 0.0 => return if self.xi > 0.0 { 1.0 } else { 0.0 },
            Some(t) => t.powf(-1.0 / self.xi),
        };
        -(-y).exp_m1()
    }

    /// The quantile: the `x` with F(x) = p (0 < p < 1).
    pub fn quantile(&self, p: f64) -> f64 {
        let y = -p.ln();
        if self.xi.abs() < GUMBEL_XI {
            self.mu - self.sigma * y.ln()
        } else {
            self.mu + self.sigma * (y.powf(-self.xi) - 1.0) / self.xi
        }
    }

    /// The `x` one block maximum exceeds with probability `q`, computed
    /// from `q` itself so that a tiny `q` keeps its precision.
    pub fn exceeded_with(&self, q: f64) -> f64 {
        let y = -(-q).ln_1p();
        if self.xi.abs() < GUMBEL_XI {
            self.mu - self.sigma * y.ln()
        } else {
            self.mu + self.sigma * (y.powf(-self.xi) - 1.0) / self.xi
        }
    }

    /// The upper end of the support (`μ − σ/ξ` when ξ < 0), else infinite.
    pub fn upper_end(&self) -> f64 {
        if self.xi <= -GUMBEL_XI {
            self.mu - self.sigma / self.xi
        } else {
            f64::INFINITY
        }
    }

    /// The negative log-likelihood of `xs` (Coles, eq. 3.7 and 3.9);
    /// infinite outside the support or for σ ≤ 0.
    pub fn nll(&self, xs: &[f64]) -> f64 {
        if self.sigma <= 0.0 || !self.sigma.is_finite() {
            return f64::INFINITY;
        }
        let n = xs.len() as f64;
        let mut sum = n * self.sigma.ln();
        let inverse_xi = 1.0 / self.xi;
        for &x in xs {
            match self.t(x) {
                None => {
                    let z = (x - self.mu) / self.sigma;
                    sum += z + (-z).exp();
                }
                Some(t) if t <= 0.0 => return f64::INFINITY,
                Some(t) => {
                    // t^(-1/ξ) as exp of the logarithm already taken: the
                    // fits call this hundreds of times a sample, and one
                    // `exp` costs far less than a `powf`.
                    let ln_t = t.ln();
                    sum += (1.0 + inverse_xi) * ln_t + (-inverse_xi * ln_t).exp();
                }
            }
        }
        sum
    }

    /// A sample of `n` values drawn from this distribution with `rng`.
    pub fn sample(&self, n: usize, rng: &mut fastrand::Rng) -> Vec<f64> {
        (0..n)
            .map(|_| {
                // Open interval: 0 and 1 have no finite quantile.
                let u = rng.f64().clamp(f64::EPSILON, 1.0 - f64::EPSILON);
                self.quantile(u)
            })
            .collect()
    }
}

/// The probability-weighted-moment estimate (Hosking, Wallis and Wood,
/// 1985), from the unbiased moments `b0, b1, b2` of the sorted sample and
/// their approximation of the shape (their eq. 14), valid for shapes
/// between −0.5 and 0.5 (Hosking's `k` is −ξ). `None` for fewer than 3
/// values or a sample without spread.
pub fn pwm(xs: &[f64]) -> Option<Gev> {
    let n = xs.len();
    if n < 3 {
        return None;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let nf = n as f64;
    let (mut b0, mut b1, mut b2) = (0.0, 0.0, 0.0);
    for (j, &x) in s.iter().enumerate() {
        let j = j as f64; // rank − 1
        b0 += x;
        b1 += x * j / (nf - 1.0);
        b2 += x * j * (j - 1.0) / ((nf - 1.0) * (nf - 2.0));
    }
    let (b0, b1, b2) = (b0 / nf, b1 / nf, b2 / nf);
    if 3.0 * b2 - b0 == 0.0 || 2.0 * b1 - b0 <= 0.0 {
        return None;
    }
    let c = (2.0 * b1 - b0) / (3.0 * b2 - b0) - 2f64.ln() / 3f64.ln();
    let k = 7.8590 * c + 2.9554 * c * c;
    let (sigma, mu) = if k.abs() < GUMBEL_XI {
        let sigma = (2.0 * b1 - b0) / 2f64.ln();
        (sigma, b0 - 0.577_215_664_901_532_9 * sigma)
    } else {
        let g = gamma(1.0 + k);
        let sigma = (2.0 * b1 - b0) * k / (g * (1.0 - 2f64.powf(-k)));
        (sigma, b0 + sigma * (g - 1.0) / k)
    };
    (sigma > 0.0 && sigma.is_finite() && mu.is_finite()).then_some(Gev { mu, sigma, xi: -k })
}

/// The maximum-likelihood estimate, searched from the PWM estimate (or
/// from the moments when that has none) over (μ, ln σ, ξ), with ξ kept
/// within ±1 (beyond, the likelihood has no maximum: Smith, 1985).
pub fn mle(xs: &[f64]) -> Option<Gev> {
    let start = pwm(xs).or_else(|| moments(xs))?;
    // The PWM start may leave some values outside its support; begin at
    // a Gumbel of the same location and scale then.
    let start = if start.nll(xs).is_finite() {
        start
    } else {
        Gev { xi: 0.0, ..start }
    };
    let f = |p: &[f64; 3]| {
        if p[2].abs() > 1.0 {
            return f64::INFINITY;
        }
        Gev {
            mu: p[0],
            sigma: p[1].exp(),
            xi: p[2],
        }
        .nll(xs)
    };
    let x0 = [start.mu, start.sigma.ln(), start.xi];
    let steps = [0.1 * start.sigma, 0.1, 0.05];
    let best = simplex::minimise(f, x0, steps, 1e-10, 4000)?;
    Some(Gev {
        mu: best[0],
        sigma: best[1].exp(),
        xi: best[2],
    })
}

/// The Gumbel moment estimate: σ = s·√6/π, μ = mean − γσ.
fn moments(xs: &[f64]) -> Option<Gev> {
    let n = xs.len() as f64;
    if n < 2.0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let sigma = var.sqrt() * 6f64.sqrt() / std::f64::consts::PI;
    (sigma > 0.0).then_some(Gev {
        mu: mean - 0.577_215_664_901_532_9 * sigma,
        sigma,
        xi: 0.0,
    })
}
