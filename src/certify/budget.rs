//! A latency budget as the user writes it: terms like `max<=100us`,
//! `p99.99<=50us`, `p99.9999<=80us`, separated by commas.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a term bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Statistic {
    /// The largest sample.
    Max,
    /// The `p`-th percentile (0 < p < 100): at most a fraction
    /// `1 − p/100` of the samples may exceed the bound.
    Percentile {
        /// The percentile, e.g. 99.99.
        p: f64,
    },
}

/// One term of a budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Term {
    /// The term as written, normalised (`p99.99<=50us`).
    pub text: String,
    /// What it bounds.
    pub statistic: Statistic,
    /// The bound, ns.
    pub bound_ns: u64,
}

impl Term {
    /// The probability of one sample exceeding the bound that the term
    /// allows: 0 for `max`, `1 − p/100` for a percentile.
    pub fn allowed(&self) -> f64 {
        match self.statistic {
            Statistic::Max => 0.0,
            Statistic::Percentile { p } => 1.0 - p / 100.0,
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// What a `max` term must show beyond the run (`--target`): at most
/// `probability` of exceeding its bound over the horizon.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The probability of exceeding allowed (0 < p < 1).
    pub probability: f64,
    /// The horizon, seconds (the mission time); `None`: per activation
    /// (one deadline).
    pub horizon_s: Option<f64>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.horizon_s {
            Some(h) => write!(f, "at most {:.1e} over {h:.0} s", self.probability),
            None => write!(f, "at most {:.1e} per activation", self.probability),
        }
    }
}

/// Parses `--target`: a probability (`1e-9`), over the mission of
/// `mission_s` seconds, or per activation (`1e-12/activation`).
pub fn parse_target(text: &str, mission_s: f64) -> Result<Target, String> {
    let bad = |why: &str| {
        format!("--target {text:?}: {why}; give a probability between 0 and 1 over the mission (1e-9, with --mission 1h) or per activation (1e-12/activation)")
    };
    let (number, per) = match text.split_once('/') {
        Some((n, per)) => (n.trim(), Some(per.trim())),
        None => (text.trim(), None),
    };
    let probability: f64 = number.parse().map_err(|_| bad("not a number"))?;
    if !(probability > 0.0 && probability < 1.0) {
        return Err(bad("not between 0 and 1"));
    }
    let horizon_s = match per {
        None => Some(mission_s),
        Some("activation" | "deadline") => None,
        Some(other) => return Err(bad(&format!("{other:?} is not activation"))),
    };
    Ok(Target {
        probability,
        horizon_s,
    })
}

const FORMS: &str = "terms like max<=100us, p99.99<=50us or p99.9999<=80us (units ns, us or µs, ms, s), separated by commas";

/// Parses a budget: one or more terms separated by commas. The error
/// names the term and what would be valid.
pub fn parse(text: &str) -> Result<Vec<Term>, String> {
    if text.trim().is_empty() {
        return Err(format!("budget {text:?} has no term: expected {FORMS}"));
    }
    let mut terms: Vec<Term> = Vec::new();
    for (i, written) in text.split(',').map(str::trim).enumerate() {
        if written.is_empty() {
            return Err(format!(
                "budget {text:?}: term {} is empty (two commas, or one at an end); expected {FORMS}",
                i + 1
            ));
        }
        let term = parse_term(written)?;
        if let Some(earlier) = terms.iter().find(|t| t.statistic == term.statistic) {
            return Err(format!(
                "budget {text:?}: {earlier} and {term} bound the same statistic; give each once"
            ));
        }
        terms.push(term);
    }
    Ok(terms)
}

fn parse_term(term: &str) -> Result<Term, String> {
    let bad = |why: &str| format!("budget term {term:?}: {why}; expected {FORMS}");
    let (stat, bound) = term.split_once("<=").ok_or_else(|| bad("no '<='"))?;
    let stat = stat.trim().to_ascii_lowercase();
    let statistic = match stat.as_str() {
        "max" => Statistic::Max,
        s => {
            let p: f64 = s
                .strip_prefix('p')
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(&format!("{s:?} is neither max nor a percentile pNN")))?;
            if !(p > 0.0 && p < 100.0) {
                return Err(bad(&format!("percentile {p} is not between 0 and 100")));
            }
            Statistic::Percentile { p }
        }
    };
    let bound = bound.trim();
    let split = bound
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| bad("the bound has no unit"))?;
    let (number, unit) = bound.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| bad(&format!("{number:?} is not a number")))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => return Err(bad(&format!("unit {u:?} is not ns, us, µs, ms or s"))),
    };
    let bound_ns = (value * scale).round();
    if !(1.0..1e15).contains(&bound_ns) {
        return Err(bad("the bound must be at least 1 ns"));
    }
    Ok(Term {
        text: format!(
            "{stat}<={number}{}",
            if unit.trim() == "µs" {
                "us"
            } else {
                unit.trim()
            }
        ),
        statistic,
        bound_ns: bound_ns as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_written_form_of_a_term_is_read() {
        let mut t = parse("max<=100us, p99.99<=50us,p99.9999<=0.08ms, P99<=2000ns").unwrap();
        t.extend(parse("max<=7µs").unwrap());
        t.extend(parse("max<=1s").unwrap());
        let got: Vec<(String, u64)> = t.iter().map(|t| (t.text.clone(), t.bound_ns)).collect();
        assert_eq!(
            got,
            [
                ("max<=100us".to_string(), 100_000),
                ("p99.99<=50us".into(), 50_000),
                ("p99.9999<=0.08ms".into(), 80_000),
                ("p99<=2000ns".into(), 2_000),
                ("max<=7us".into(), 7_000),
                ("max<=1s".into(), 1_000_000_000),
            ]
        );
        assert_eq!(t[0].allowed(), 0.0);
        assert!((t[1].allowed() - 1e-4).abs() < 1e-12);
    }

    #[test]
    fn a_target_is_over_the_mission_or_per_activation() {
        let t = parse_target("1e-9", 3600.0).unwrap();
        assert_eq!((t.probability, t.horizon_s), (1e-9, Some(3600.0)));
        let t = parse_target("1e-12/activation", 3600.0).unwrap();
        assert_eq!((t.probability, t.horizon_s), (1e-12, None));
        for bad in ["0", "1.5", "x", "1e-9/hour"] {
            assert!(
                parse_target(bad, 1.0).unwrap_err().contains("--target"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_bad_term_is_refused_by_name_with_the_valid_forms() {
        for (bad, why) in [
            ("", "no term"),
            ("max<100us", "no '<='"),
            ("avg<=10us", "neither max nor a percentile"),
            ("p100<=10us", "not between 0 and 100"),
            ("p0<=10us", "not between 0 and 100"),
            ("max<=10", "no unit"),
            ("max<=10min", "unit \"min\""),
            ("max<=0us", "at least 1 ns"),
            ("max<=1.2.3us", "not a number"),
            ("max<=100us,", "term 2 is empty"),
            ("max<=100us,,p99<=50us", "term 2 is empty"),
            (",max<=100us", "term 1 is empty"),
            ("max<=100us,max<=50us", "bound the same statistic"),
            (
                "max<=100us,p99<=5us,P99<=7us",
                "p99<=5us and p99<=7us bound the same",
            ),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains("max<=100us"),
                "{bad}: {err}"
            );
        }
    }
}
