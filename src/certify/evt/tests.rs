use super::checks::{ad_cdf, anderson_darling, kolmogorov_q, runs, two_sample_ks};
use super::gev::{mle, pwm, Gev};
use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn the_anderson_darling_distribution_gives_stephens_critical_values() {
    // Stephens (1974), the case of a fully specified distribution: the
    // asymptotic 10 %, 5 % and 1 % points of A² are 1.933, 2.492, 3.857.
    for (z, p) in [(1.933, 0.90), (2.492, 0.95), (3.857, 0.99)] {
        let got = ad_cdf(1_000_000, z);
        assert!(close(got, p, 0.001), "P(A² < {z}) = {got}, want {p}");
    }
    // Small samples: the correction moves the point, not far.
    assert!(close(ad_cdf(10, 2.492), 0.95, 0.005));
}

#[test]
fn the_kolmogorov_tail_gives_its_critical_values() {
    // The asymptotic 10 %, 5 % and 1 % points of √n·D: 1.224, 1.358, 1.628.
    for (l, q) in [(1.2238, 0.10), (1.3581, 0.05), (1.6276, 0.01)] {
        assert!(
            close(kolmogorov_q(l), q, 0.0005),
            "Q({l}) = {}",
            kolmogorov_q(l)
        );
    }
}

#[test]
fn the_runs_test_counts_runs_about_the_median() {
    // Sorted 1..10: 5 below then 5 above the median 5.5, 2 runs; under
    // independence 6 ± √(2·25·40/(100·9)), z = −2.683, p = 0.0073.
    let rising: Vec<f64> = (1..=10).map(f64::from).collect();
    let t = runs(&rising);
    assert!(close(t.statistic, -2.6833, 1e-4), "{t:?}");
    assert!(close(t.p_value, 0.00729, 1e-4), "{t:?}");
    assert!(!t.passed);
    // Alternating: 10 runs, too many, z = +2.683.
    let alternating: Vec<f64> = (0..10)
        .map(|i| if i % 2 == 0 { 1.0 } else { 9.0 })
        .collect();
    assert!(close(runs(&alternating).statistic, 2.6833, 1e-4));
}

#[test]
fn two_sample_ks_finds_the_largest_gap() {
    let t = two_sample_ks(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
    assert_eq!(t.statistic, 1.0);
    let t = two_sample_ks(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]);
    assert!(close(t.statistic, 0.25, 1e-12) && t.passed, "{t:?}");
}

#[test]
fn the_gev_quantile_inverts_its_distribution_function() {
    for g in [
        Gev {
            mu: 10.0,
            sigma: 2.0,
            xi: -0.2,
        },
        Gev {
            mu: 10.0,
            sigma: 2.0,
            xi: 0.0,
        },
        Gev {
            mu: 10.0,
            sigma: 2.0,
            xi: 0.3,
        },
    ] {
        for p in [0.01, 0.5, 0.99, 0.999_999] {
            let x = g.quantile(p);
            assert!(close(g.cdf(x), p, 1e-12), "{g:?} at {p}");
            assert!(
                close(g.exceedance(x), 1.0 - p, 1e-9 * (1.0 - p).max(1e-6)),
                "{g:?}"
            );
        }
    }
    // ξ < 0 ends at μ − σ/ξ: nothing beyond.
    let bounded = Gev {
        mu: 0.0,
        sigma: 1.0,
        xi: -0.5,
    };
    assert_eq!(bounded.upper_end(), 2.0);
    assert_eq!(bounded.exceedance(2.5), 0.0);
}

/// Samples drawn from a known GEV give back its parameters: by maximum
/// likelihood within about three standard errors (Coles' asymptotic
/// σ/√n scale), and by PWM a little wider.
#[test]
fn fits_recover_the_parameters_of_a_known_gev() {
    let mut rng = fastrand::Rng::with_seed(7);
    for truth in [
        Gev {
            mu: 20_000.0,
            sigma: 1_500.0,
            xi: -0.2,
        },
        Gev {
            mu: 20_000.0,
            sigma: 1_500.0,
            xi: 0.0,
        },
        Gev {
            mu: 20_000.0,
            sigma: 1_500.0,
            xi: 0.2,
        },
    ] {
        let xs = truth.sample(3000, &mut rng);
        let m = mle(&xs).unwrap();
        assert!(close(m.mu, truth.mu, 100.0), "{truth:?} → {m:?}");
        assert!(close(m.sigma, truth.sigma, 90.0), "{truth:?} → {m:?}");
        assert!(close(m.xi, truth.xi, 0.05), "{truth:?} → {m:?}");
        let p = pwm(&xs).unwrap();
        assert!(close(p.xi, truth.xi, 0.08), "{truth:?} → PWM {p:?}");
        // The likelihood's maximum is at least as high as the PWM point's.
        assert!(m.nll(&xs) <= p.nll(&xs) + 1e-9);
    }
}

fn per_second(g: &Gev, n: usize, seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    g.sample(n, &mut rng)
        .into_iter()
        .map(|x| x.max(0.0) as u64)
        .collect()
}

#[test]
fn a_light_tail_is_extrapolated_and_brackets_the_true_probability() {
    let truth = Gev {
        mu: 20_000.0,
        sigma: 1_000.0,
        xi: -0.05,
    };
    let bound = truth.quantile(1.0 - 1e-3) as u64;
    let est = estimate(&per_second(&truth, 600, 3), bound, 600.0, 0.95);
    assert!(est.extrapolated(), "{est:?}");
    assert_eq!((est.block_s, est.blocks), (1.0, 600));
    let one = &est.exceedance[0];
    assert_eq!(one.horizon_s, 1.0);
    assert!(one.lower <= 1e-3 && 1e-3 <= one.upper, "{one:?}");
    let hour = &est.exceedance[1];
    assert!(close(
        hour.estimate,
        over_horizon(one.estimate, 3600.0),
        1e-12
    ));
    assert!(hour.estimate > one.estimate && hour.upper <= 1.0);
}

#[test]
fn a_heavy_tail_is_not_extrapolated() {
    let heavy = Gev {
        mu: 20_000.0,
        sigma: 1_000.0,
        xi: 0.6,
    };
    let est = estimate(&per_second(&heavy, 900, 5), 1_000_000, 900.0, 0.95);
    assert!(!est.extrapolated());
    let why = est.refused.unwrap();
    assert!(why.contains("heavy") || why.contains("Anderson"), "{why}");
}

#[test]
fn a_drift_or_dependence_forbids_extrapolation() {
    let g = Gev {
        mu: 20_000.0,
        sigma: 500.0,
        xi: -0.1,
    };
    // The second half slower by four scales: not one distribution.
    let mut drift = per_second(&g, 600, 9);
    for x in drift[300..].iter_mut() {
        *x += 2_000;
    }
    let est = estimate(&drift, 40_000, 600.0, 0.95);
    assert!(est.refused.unwrap().contains("runs test") || !est.stationarity.unwrap().passed);
    // Slow periods that last: each value repeated five times.
    let sticky: Vec<u64> = per_second(&g, 120, 11)
        .into_iter()
        .flat_map(|x| std::iter::repeat_n(x, 5))
        .collect();
    let est = estimate(&sticky, 40_000, 600.0, 0.95);
    assert!(!est.independence.unwrap().passed);
    assert!(est.refused.unwrap().contains("independence"));
}

#[test]
fn too_short_a_run_is_refused_and_long_ones_take_longer_blocks() {
    assert!(estimate(&[1000; 30], 2000, 30.0, 0.95)
        .refused
        .unwrap()
        .contains("fewer than"));
    let (k, maxima) = blocks(&(0..2500u64).collect::<Vec<_>>());
    assert_eq!((k, maxima.len()), (3, 833));
    assert_eq!(maxima[0], 2.0);
}

#[test]
fn a_bound_beyond_every_horizon_has_probabilities_in_order() {
    let g = Gev {
        mu: 20_000.0,
        sigma: 800.0,
        xi: -0.1,
    };
    let est = estimate(&per_second(&g, 300, 13), 60_000, 300.0, 0.95);
    for e in &est.exceedance {
        assert!(e.lower <= e.estimate && e.estimate <= e.upper, "{e:?}");
    }
    let t = anderson_darling(&g.sample(200, &mut fastrand::Rng::with_seed(1)), |x| {
        g.cdf(x)
    });
    assert!(t.passed, "{t:?}");
    let wrong = Gev { mu: 21_000.0, ..g };
    let t = anderson_darling(&g.sample(200, &mut fastrand::Rng::with_seed(1)), |x| {
        wrong.cdf(x)
    });
    assert!(!t.passed, "{t:?}");
}

/// Port Pirie's annual maximum sea levels, 1923 to 1987, metres (Coles,
/// 2001, ch. 3; the R package ismev's `portpirie`, as Extremes.jl ships it
/// in `data/portpirie.csv`).
const PORT_PIRIE: [f64; 65] = [
    4.03, 3.83, 3.65, 3.88, 4.01, 4.08, 4.18, 3.80, 4.36, 3.96, 3.98, 4.69, 3.85, 3.96, 3.85, 3.93,
    3.75, 3.63, 3.57, 4.25, 3.97, 4.05, 4.24, 4.22, 3.73, 4.37, 4.06, 3.71, 3.96, 4.06, 4.55, 3.79,
    3.89, 4.11, 3.85, 3.86, 3.86, 4.21, 4.01, 4.11, 4.24, 3.96, 4.21, 3.74, 3.85, 3.88, 3.66, 4.11,
    3.71, 4.18, 3.90, 3.78, 3.91, 3.72, 4.00, 3.66, 3.62, 4.33, 4.55, 3.75, 4.08, 3.90, 3.88, 3.94,
    4.33,
];

/// Coles' daily rainfall (ismev's `rain`): the 152 excesses over 30 mm.
const RAIN_EXCESSES: [f64; 152] = [
    1.8, 2.5, 1.8, 14.5, 0.5, 13.2, 5.6, 8.1, 2.0, 1.8, 3.0, 9.1, 0.5, 1.8, 2.3, 3.0, 0.5, 2.5,
    18.5, 5.3, 10.6, 0.5, 4.3, 2.8, 0.5, 15.7, 1.8, 3.5, 3.5, 1.8, 4.8, 5.3, 7.8, 46.7, 2.3, 4.0,
    3.8, 6.6, 0.5, 15.7, 56.6, 5.6, 17.8, 17.5, 4.3, 18.5, 0.7, 13.4, 29.4, 5.1, 23.3, 3.5, 0.5,
    0.2, 10.9, 12.7, 53.3, 24.9, 29.2, 1.8, 7.3, 2.5, 4.0, 37.3, 1.2, 0.2, 6.1, 6.8, 8.4, 1.0, 3.3,
    17.0, 2.0, 3.0, 8.1, 0.5, 42.4, 4.3, 7.1, 3.0, 10.9, 9.9, 17.0, 6.3, 0.5, 0.5, 25.9, 1.8, 21.3,
    55.3, 11.9, 0.5, 3.0, 5.6, 25.9, 14.2, 8.1, 4.3, 1.8, 2.0, 1.8, 5.6, 15.2, 0.5, 9.4, 0.2, 14.5,
    1.8, 3.8, 21.6, 5.3, 29.4, 3.5, 5.3, 0.5, 6.8, 17.8, 12.9, 7.6, 25.4, 5.3, 12.4, 3.0, 3.0,
    10.1, 4.8, 8.1, 9.4, 4.0, 5.6, 4.3, 3.5, 1.0, 6.6, 6.3, 8.4, 8.1, 17.0, 1.0, 0.5, 1.2, 5.6,
    18.8, 11.9, 1.7, 1.2, 21.3, 3.5, 7.6, 9.4, 9.4, 15.7,
];

#[test]
fn gev_maximum_likelihood_matches_coles_port_pirie_fit() {
    // ismev's gev.fit: μ 3.87474692, σ 0.19804120, ξ −0.05008773,
    // nllh −4.339058 (Coles, 2001, p. 59: 3.87, 0.198, −0.050); the
    // converged optimum is 2e-5 further in ξ, where ismev's optim stops.
    let g = mle(&PORT_PIRIE).unwrap();
    assert!(close(g.mu, 3.874_75, 2e-5), "{g:?}");
    assert!(close(g.sigma, 0.198_04, 2e-5), "{g:?}");
    assert!(close(g.xi, -0.050_10, 6e-5), "{g:?}");
    assert!(
        close(g.nll(&PORT_PIRIE), -4.339_058, 1e-6),
        "{}",
        g.nll(&PORT_PIRIE)
    );
    // Coles' return levels: 4.30 m for 10 years, 4.69 m for 100.
    assert!(close(g.quantile(1.0 - 1.0 / 10.0), 4.30, 0.005));
    assert!(close(g.quantile(1.0 - 1.0 / 100.0), 4.69, 0.005));
}

#[test]
fn gev_pwm_matches_hosking_wallis_wood_on_port_pirie() {
    // Extremes.jl's gevfitpwm (the same approximation of the shape):
    // μ 3.8731723562720766, ln σ −1.5932320395836068, ξ −0.051477125862911276.
    let g = pwm(&PORT_PIRIE).unwrap();
    assert!(close(g.mu, 3.873_172_356_272_08, 1e-9), "{g:?}");
    assert!(close(g.sigma.ln(), -1.593_232_039_583_61, 1e-9), "{g:?}");
    assert!(close(g.xi, -0.051_477_125_862_91, 1e-9), "{g:?}");
}

#[test]
fn gpd_maximum_likelihood_matches_coles_rainfall_fit() {
    // ismev's gpd.fit(rain, 30): σ 7.4422639, ξ 0.1843027, nllh 485.0937
    // (Coles, 2001, §4.4.1: 7.44, 0.184); ismev stops 2e-3 short in σ.
    let g = super::gpd::mle(&RAIN_EXCESSES).unwrap();
    assert!(close(g.sigma, 7.440_27, 3e-3), "{g:?}");
    assert!(close(g.xi, 0.184_50, 3e-4), "{g:?}");
    assert!(close(g.nll(&RAIN_EXCESSES), 485.093_7, 1e-4));
    assert!(close(g.exceedance(0.0), 1.0, 0.0) && g.exceedance(1e9) < 1e-6);
}

#[test]
fn anderson_darling_matches_the_published_case_zero_value() {
    // SciPy's test against Stephens' table: x = 1..100 against
    // Normal(45.01575354024957, 30) gives A² = 2.492, p ≈ 0.05.
    let normal = statrs::distribution::Normal::new(45.015_753_540_249_57, 30.0).unwrap();
    let xs: Vec<f64> = (1..=100).map(f64::from).collect();
    let t = anderson_darling(&xs, |x| {
        statrs::distribution::ContinuousCDF::cdf(&normal, x)
    });
    assert!(close(t.statistic, 2.492, 1e-6), "{t:?}");
    assert!(close(t.p_value, 0.05, 0.003), "{t:?}");
}

#[test]
fn the_band_holds_the_fit_and_narrows_where_the_data_are() {
    let g = Gev {
        mu: 20_000.0,
        sigma: 800.0,
        xi: -0.1,
    };
    let bound = 40_000;
    let est = estimate(&per_second(&g, 600, 13), bound, 600.0, 0.95);
    let fit = est.fit.unwrap();
    assert_eq!(est.band.len(), 60);
    let last = est.band.last().unwrap();
    assert!(
        (last.x_ns - 44_000.0).abs() < 1.0,
        "a tenth past the bound: {last:?}"
    );
    for b in &est.band {
        let p = fit.exceedance(b.x_ns);
        assert!(b.lower <= p && p <= b.upper, "{b:?} around {p}");
    }
    // Where the maxima are, P(> x) near a half is known to within a few
    // tens of percent; far in the tail the band is wider, relative to it.
    let width = |b: &super::BandPoint| b.upper / b.lower.max(f64::MIN_POSITIVE);
    let middle = est
        .band
        .iter()
        .find(|b| fit.exceedance(b.x_ns) < 0.5)
        .unwrap();
    let tail = est
        .band
        .iter()
        .rev()
        .find(|b| fit.exceedance(b.x_ns) > 1e-4)
        .unwrap();
    assert!(width(middle) < 2.0, "{middle:?}");
    assert!(width(tail) > width(middle), "{tail:?} against {middle:?}");
}

#[test]
fn the_bootstrap_is_sized_to_the_confidence_and_ranks_right() {
    assert_eq!(resamples(0.95), Some(400));
    assert_eq!(resamples(0.99), Some(2000));
    assert_eq!(resamples(0.995), Some(4000));
    assert_eq!(resamples(0.999), None, "4000 resamples leave 4 beyond it");
    assert_eq!(resamples(0.5), Some(MIN_RESAMPLES));
    // 0.05 · 200 is 10.000000000000009 in floating point: the 10th.
    let v: Vec<f64> = (1..=200).map(f64::from).collect();
    assert_eq!(quantile(&v, 0.05), 10.0);
    assert_eq!(quantile(&v, 0.95), 190.0);
}

#[test]
fn resamples_past_the_tails_end_bound_it_at_zero_not_at_one() {
    // Every resample's tail ends below the bound: the bound is 0.
    assert_eq!(basic_interval(0.0, &[0.0; 400], 0.95), (0.0, 0.0));
    // The fit reaches past it, but a tenth of the resamples do not: the
    // log scale is undefined there; the percentile bound is taken.
    let mut ps = vec![1e-6; 360];
    ps.extend([0.0; 40]);
    let (lo, hi) = basic_interval(1e-6, &ps, 0.95);
    assert_eq!((lo, hi), (0.0, 1e-6));
}

#[test]
fn kpss_finds_a_drift_the_halves_may_miss() {
    let mut rng = fastrand::Rng::with_seed(3);
    let flat: Vec<f64> = (0..300).map(|_| rng.f64()).collect();
    assert!(checks::kpss_ranks(&flat).passed);
    let drift: Vec<f64> = (0..300).map(|i| rng.f64() + i as f64 / 150.0).collect();
    let t = checks::kpss_ranks(&drift);
    assert!(!t.passed && t.p_value < 0.01, "{t:?}");
    // The published quantiles are the p-values' anchors.
    assert!((checks::kpss_p_value(0.463) - 0.05).abs() < 1e-12);
    assert!((checks::kpss_p_value(0.739) - 0.01).abs() < 1e-12);
}
