//! The generalised Pareto distribution of excesses over a threshold
//! (peaks over threshold: Coles, 2001, ch. 4) and its maximum-likelihood
//! fit: `H(y) = 1 − (1 + ξy/σ)^(−1/ξ)` for excesses `y > 0`, the
//! exponential `1 − exp(−y/σ)` at ξ = 0.

use serde::{Deserialize, Serialize};

use super::simplex;

const EXPONENTIAL_XI: f64 = 1e-7;

/// A GPD of excesses: scale `sigma` (> 0), shape `xi`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gpd {
    /// Scale σ.
    pub sigma: f64,
    /// Shape ξ (> 0 heavy tail).
    pub xi: f64,
}

impl Gpd {
    /// The probability that an excess is larger than `y`, `1 − H(y)`.
    pub fn exceedance(&self, y: f64) -> f64 {
        if y <= 0.0 {
            return 1.0;
        }
        if self.xi.abs() < EXPONENTIAL_XI {
            return (-y / self.sigma).exp();
        }
        let t = 1.0 + self.xi * y / self.sigma;
        if t <= 0.0 {
            0.0
        } else {
            t.powf(-1.0 / self.xi)
        }
    }

    /// The negative log-likelihood of the excesses `ys` (Coles, eq. 4.10
    /// and its exponential limit); infinite outside the support.
    pub fn nll(&self, ys: &[f64]) -> f64 {
        if self.sigma <= 0.0 || !self.sigma.is_finite() {
            return f64::INFINITY;
        }
        let mut sum = ys.len() as f64 * self.sigma.ln();
        for &y in ys {
            if self.xi.abs() < EXPONENTIAL_XI {
                sum += y / self.sigma;
                continue;
            }
            let t = 1.0 + self.xi * y / self.sigma;
            if t <= 0.0 {
                return f64::INFINITY;
            }
            sum += (1.0 + 1.0 / self.xi) * t.ln();
        }
        sum
    }
}

/// The maximum-likelihood fit to the excesses `ys` (all > 0), searched
/// over (ln σ, ξ) from the moment estimate (Hosking and Wallis, 1987:
/// ξ = ½(1 − m²/s²), σ = ½m(m²/s² + 1)), with ξ within ±1.
pub fn mle(ys: &[f64]) -> Option<Gpd> {
    let n = ys.len() as f64;
    if n < 3.0 {
        return None;
    }
    let m = ys.iter().sum::<f64>() / n;
    let s2 = ys.iter().map(|y| (y - m).powi(2)).sum::<f64>() / (n - 1.0);
    if m <= 0.0 || s2 <= 0.0 {
        return None;
    }
    let r = m * m / s2;
    let mut start = Gpd {
        sigma: 0.5 * m * (r + 1.0),
        xi: (0.5 * (1.0 - r)).clamp(-0.9, 0.9),
    };
    if !start.nll(ys).is_finite() {
        start = Gpd { sigma: m, xi: 0.0 };
    }
    let f = |p: &[f64; 2]| {
        if p[1].abs() > 1.0 {
            return f64::INFINITY;
        }
        Gpd {
            sigma: p[0].exp(),
            xi: p[1],
        }
        .nll(ys)
    };
    let best = simplex::minimise(f, [start.sigma.ln(), start.xi], [0.1, 0.05], 1e-12, 4000)?;
    Some(Gpd {
        sigma: best[0].exp(),
        xi: best[1],
    })
}
