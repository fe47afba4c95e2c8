//! The Nelder-Mead simplex search for a minimum of a function of a few
//! parameters, with the standard coefficients (reflection 1, expansion 2,
//! contraction ½, shrink ½) and restarts from the best point until a
//! restart no longer improves it (Nelder-Mead can stall on a ridge).

/// The point where `f` is least, searched from `x0` with initial steps
/// `steps`, until the simplex's values differ by at most `tol` (relative)
/// or `max_evals` evaluations; `None` when `f` is not finite at `x0`.
pub fn minimise<const N: usize>(
    f: impl Fn(&[f64; N]) -> f64,
    x0: [f64; N],
    steps: [f64; N],
    tol: f64,
    max_evals: usize,
) -> Option<[f64; N]> {
    let mut best = x0;
    let mut best_f = f(&x0);
    if !best_f.is_finite() {
        return None;
    }
    let mut evals = 0;
    for _ in 0..8 {
        let (x, fx) = search(&f, best, steps, tol, max_evals, &mut evals);
        let improved = best_f - fx > tol * (1.0 + best_f.abs());
        if fx <= best_f {
            (best, best_f) = (x, fx);
        }
        if !improved || evals >= max_evals {
            break;
        }
    }
    Some(best)
}

fn search<const N: usize>(
    f: &impl Fn(&[f64; N]) -> f64,
    x0: [f64; N],
    steps: [f64; N],
    tol: f64,
    max_evals: usize,
    evals: &mut usize,
) -> ([f64; N], f64) {
    let count = std::cell::Cell::new(*evals);
    let eval = |x: &[f64; N]| {
        count.set(count.get() + 1);
        let v = f(x);
        if v.is_nan() {
            f64::INFINITY
        } else {
            v
        }
    };
    let mut pts: Vec<([f64; N], f64)> = Vec::with_capacity(N + 1);
    pts.push((x0, eval(&x0)));
    for i in 0..N {
        let mut x = x0;
        x[i] += if steps[i] != 0.0 { steps[i] } else { 1e-3 };
        pts.push((x, eval(&x)));
    }
    let along = |a: &[f64; N], b: &[f64; N], t: f64| -> [f64; N] {
        std::array::from_fn(|i| a[i] + t * (b[i] - a[i]))
    };
    while count.get() < max_evals {
        pts.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (lo, hi) = (pts[0].1, pts[N].1);
        if (hi - lo).abs() <= tol * (lo.abs() + hi.abs() + 1e-300) && hi.is_finite() {
            break;
        }
        let centre: [f64; N] =
            std::array::from_fn(|i| pts[..N].iter().map(|p| p.0[i]).sum::<f64>() / N as f64);
        let worst = pts[N].0;
        let reflected = along(&centre, &worst, -1.0);
        let fr = eval(&reflected);
        if fr < pts[0].1 {
            let expanded = along(&centre, &worst, -2.0);
            let fe = eval(&expanded);
            pts[N] = if fe < fr {
                (expanded, fe)
            } else {
                (reflected, fr)
            };
        } else if fr < pts[N - 1].1 {
            pts[N] = (reflected, fr);
        } else {
            let (toward, ft) = if fr < pts[N].1 {
                (reflected, fr)
            } else {
                (worst, pts[N].1)
            };
            let contracted = along(&centre, &toward, 0.5);
            let fc = eval(&contracted);
            if fc < ft {
                pts[N] = (contracted, fc);
            } else {
                let first = pts[0].0;
                for p in pts.iter_mut().skip(1) {
                    p.0 = along(&first, &p.0, 0.5);
                    p.1 = eval(&p.0);
                }
            }
        }
    }
    pts.sort_by(|a, b| a.1.total_cmp(&b.1));
    *evals = count.get();
    pts[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_minimum_of_rosenbrocks_valley() {
        let rosen = |p: &[f64; 2]| (1.0 - p[0]).powi(2) + 100.0 * (p[1] - p[0] * p[0]).powi(2);
        let x = minimise(rosen, [-1.2, 1.0], [0.1, 0.1], 1e-14, 10_000).unwrap();
        assert!(
            (x[0] - 1.0).abs() < 1e-4 && (x[1] - 1.0).abs() < 1e-4,
            "{x:?}"
        );
    }

    #[test]
    fn an_infinite_start_has_no_answer() {
        assert!(minimise(|_: &[f64; 1]| f64::INFINITY, [0.0], [1.0], 1e-9, 100).is_none());
    }
}
