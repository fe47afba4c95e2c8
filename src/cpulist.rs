//! The one CPU-set type of cpushield.
//!
//! The kernel speaks about CPU sets in two textual forms: the *cpulist*
//! (`0-3,8`, used by `cpuset.cpus`, `smp_affinity_list`, `Cpus_allowed_list`)
//! and the *hex mask* (`ff,ffffffff`, 32-bit groups separated by commas, used by
//! `smp_affinity`, `default_smp_affinity` and the workqueue cpumask). partrt
//! took masks as `0xc`. [`CpuSet`] parses and prints all of them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::input::quote;

/// Highest CPU number accepted when parsing; the kernel's NR_CPUS limit is 8192.
pub const MAX_CPUS: u32 = 8192;

/// A set of CPU numbers, stored as a bitmap.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    words: Vec<u64>,
}

/// Why a CPU list or mask could not be parsed. Its message quotes at most
/// a short prefix of a long input, with its length ([`crate::input::quote`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid CPU list {}: {reason} (valid forms: \"2-3\", \"1,3,5-7\", \"0xc\")",
    quote(input)
)]
pub struct ParseCpuSetError {
    /// The text that was given.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set `{0, 1, ..., n-1}`.
    pub fn first_n(n: u32) -> Self {
        (0..n).collect()
    }

    /// Adds one CPU.
    pub fn insert(&mut self, cpu: u32) {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << b;
    }

    /// Removes one CPU.
    pub fn remove(&mut self, cpu: u32) {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << b);
        }
        self.trim();
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The lowest CPU of the set.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// The highest CPU of the set.
    pub fn last(&self) -> Option<u32> {
        self.iter().last()
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            (0..64u32)
                .filter(move |b| word & (1u64 << b) != 0)
                .map(move |b| i as u32 * 64 + b)
        })
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut out = CpuSet {
            words: self
                .words
                .iter()
                .zip(&other.words)
                .map(|(a, b)| a & b)
                .collect(),
        };
        out.trim();
        out
    }

    /// CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let words = (0..n)
            .map(|i| self.words.get(i).unwrap_or(&0) | other.words.get(i).unwrap_or(&0))
            .collect();
        CpuSet { words }
    }

    /// These CPUs without `shield`; `fallback` when nothing would remain
    /// (where a task or an IRQ goes when it leaves the shield).
    pub fn away_from(&self, shield: &CpuSet, fallback: &CpuSet) -> CpuSet {
        match self.difference(shield) {
            s if s.is_empty() => fallback.clone(),
            s => s,
        }
    }

    /// CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut out = CpuSet {
            words: self
                .words
                .iter()
                .enumerate()
                .map(|(i, w)| w & !other.words.get(i).unwrap_or(&0))
                .collect(),
        };
        out.trim();
        out
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.difference(other).is_empty()
    }

    /// Whether every CPU of `other` is in `self`.
    pub fn is_superset_of(&self, other: &CpuSet) -> bool {
        other.is_subset(self)
    }

    /// Whether the two sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Parses the kernel cpulist form (`0-3,8`, `0-7:2/4` is not supported).
    /// An empty or whitespace-only string is the empty set, as the kernel prints it.
    pub fn parse_list(input: &str) -> Result<CpuSet, ParseCpuSetError> {
        let err = |reason: String| ParseCpuSetError {
            input: input.to_string(),
            reason,
        };
        let mut set = CpuSet::new();
        let text = input.trim();
        if text.is_empty() {
            return Ok(set);
        }
        for part in text.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let num = |s: &str| -> Result<u32, ParseCpuSetError> {
                let n: u32 = s
                    .parse()
                    .map_err(|_| err(format!("{} is not a CPU number", quote(s))))?;
                if n >= MAX_CPUS {
                    return Err(err(format!(
                        "CPU {n} is beyond the kernel limit {MAX_CPUS}"
                    )));
                }
                Ok(n)
            };
            let (lo, hi) = (num(lo)?, num(hi)?);
            if lo > hi {
                return Err(err(format!("range {} runs backwards", quote(part))));
            }
            for cpu in lo..=hi {
                set.insert(cpu);
            }
        }
        Ok(set)
    }

    /// Parses the kernel hex-mask form: 32-bit hex groups separated by commas,
    /// most significant first (`ff,ffffffff`), with an optional `0x` prefix.
    pub fn parse_mask(input: &str) -> Result<CpuSet, ParseCpuSetError> {
        let err = |reason: &str| ParseCpuSetError {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        let text = input.trim();
        let text = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        if text.is_empty() {
            return Err(err("empty mask"));
        }
        let digits: String = text.chars().filter(|c| *c != ',').collect();
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(err("a mask has only hex digits and commas"));
        }
        let mut set = CpuSet::new();
        for (i, c) in digits.chars().rev().enumerate() {
            let nibble = c.to_digit(16).expect("checked hex digit");
            for bit in 0..4 {
                if nibble & (1 << bit) != 0 {
                    let cpu = (i * 4 + bit) as u32;
                    if cpu >= MAX_CPUS {
                        return Err(err("mask names CPUs beyond the kernel limit"));
                    }
                    set.insert(cpu);
                }
            }
        }
        Ok(set)
    }

    /// Parses what a user typed: a hex mask when it starts with `0x`,
    /// otherwise a cpulist. An empty result is an error here.
    pub fn parse_user(input: &str) -> Result<CpuSet, ParseCpuSetError> {
        let t = input.trim();
        let set = if t.starts_with("0x") || t.starts_with("0X") {
            CpuSet::parse_mask(t)?
        } else {
            CpuSet::parse_list(t)?
        };
        if set.is_empty() {
            return Err(ParseCpuSetError {
                input: input.to_string(),
                reason: "no CPU given".into(),
            });
        }
        Ok(set)
    }

    /// The cpulist form for an error or a report line: whole when short,
    /// else its first CPUs and its length (`0,2,4,6,… (20470 bytes)`), as
    /// [`crate::input::brief`] shows text.
    pub fn brief(&self) -> String {
        crate::input::brief(&self.to_string())
    }

    /// The kernel hex-mask form, in 32-bit groups, padded to `ncpus` bits
    /// the way `/proc/irq/*/smp_affinity` prints it.
    pub fn to_mask(&self, ncpus: u32) -> String {
        let bits = ncpus.max(self.last().map_or(1, |c| c + 1));
        let groups = bits.div_ceil(32) as usize;
        let mut parts = Vec::with_capacity(groups);
        for g in (0..groups).rev() {
            let word = self.words.get(g / 2).copied().unwrap_or(0);
            let half = if g % 2 == 0 {
                word as u32
            } else {
                (word >> 32) as u32
            };
            parts.push(half);
        }
        let width = if groups == 1 {
            (bits as usize).div_ceil(4)
        } else {
            8
        };
        parts
            .iter()
            .map(|p| format!("{p:0width$x}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for CpuSet {
    /// The kernel cpulist form, ranges collapsed: `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.iter().peekable();
        while let Some(lo) = iter.next() {
            let mut hi = lo;
            while iter.peek() == Some(&(hi + 1)) {
                hi = iter.next().expect("peeked");
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromStr for CpuSet {
    type Err = ParseCpuSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse_user(s)
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut set = CpuSet::new();
        for cpu in iter {
            set.insert(cpu);
        }
        set
    }
}

impl Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_lists() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert!(CpuSet::parse_list("\n").unwrap().is_empty());
    }

    #[test]
    fn rejects_bad_lists_with_reason() {
        for bad in ["abc", "3-1", "1,,2", "-1", "1-", "99999"] {
            let e = CpuSet::parse_list(bad).unwrap_err();
            assert_eq!(e.input, bad);
            assert!(e.to_string().contains("valid forms"), "{e}");
        }
        assert!(CpuSet::parse_user("").is_err());
        assert!(CpuSet::parse_user("0x0").is_err());
    }

    #[test]
    fn parses_masks_in_both_forms() {
        assert_eq!(CpuSet::parse_user("0xc").unwrap().to_string(), "2-3");
        assert_eq!(CpuSet::parse_mask("f").unwrap().to_string(), "0-3");
        assert_eq!(
            CpuSet::parse_mask("00000001,00000000").unwrap().to_string(),
            "32"
        );
        assert!(CpuSet::parse_mask("xyz").is_err());
    }

    #[test]
    fn prints_masks_like_the_kernel() {
        let s = CpuSet::parse_list("0-1").unwrap();
        assert_eq!(s.to_mask(4), "3");
        assert_eq!(s.to_mask(8), "03");
        assert_eq!(s.to_mask(64), "00000000,00000003");
        assert_eq!(
            CpuSet::parse_list("32").unwrap().to_mask(33),
            "00000001,00000000"
        );
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-3").unwrap();
        let b = CpuSet::parse_list("2-5").unwrap();
        assert_eq!(a.intersection(&b).to_string(), "2-3");
        assert_eq!(a.union(&b).to_string(), "0-5");
        assert_eq!(a.difference(&b).to_string(), "0-1");
        assert!(a.intersects(&b));
        assert!(!a.difference(&b).intersects(&b));
        assert!(CpuSet::parse_list("1").unwrap().is_subset(&a));
        assert_eq!(a.difference(&a), CpuSet::new());
    }

    #[test]
    fn errors_quote_a_short_prefix_of_a_long_list_with_its_length() {
        let list: String = (0..20_000).map(|i| format!("{i},")).collect::<String>() + "x";
        assert!(list.len() > 100_000);
        let e = CpuSet::parse_user(&list).unwrap_err().to_string();
        assert!(e.len() < 300, "{} bytes: {e}", e.len());
        assert!(
            e.contains("\"0,1,2,3,4,5,") && e.contains(&format!("({} bytes)", list.len())),
            "{e}"
        );
        assert!(e.contains("beyond the kernel limit"), "{e}");
        // One part of 100 kB: quoted short in the reason too.
        let e = CpuSet::parse_user(&format!("1,{}", "9".repeat(100_000)))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 300 && e.contains("is not a CPU number"), "{e}");
        let spread: CpuSet = (0..MAX_CPUS).step_by(2).collect();
        assert!(spread.to_string().len() > 15_000);
        assert!(spread.brief().starts_with("0,2,4,6,8,") && spread.brief().len() < 80);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Inputs of any length and content: no panic, and an error of a
        /// few hundred bytes whatever the input's size.
        #[test]
        fn errors_are_bounded_whatever_the_input(
            unit in "[0-9,x\\-\n\"\\\\ ]{1,12}|\\PC{1,12}",
            repeat in 1usize..10_000,
        ) {
            let input = unit.repeat(repeat);
            for r in [CpuSet::parse_user(&input), CpuSet::parse_mask(&input)] {
                if let Err(e) = r {
                    let text = e.to_string();
                    prop_assert!(text.len() < 300, "{} bytes for a {}-byte input: {}", text.len(), input.len(), text);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn list_and_mask_round_trip(cpus in proptest::collection::btree_set(0u32..300, 0..40)) {
            let set: CpuSet = cpus.iter().copied().collect();
            prop_assert_eq!(CpuSet::parse_list(&set.to_string()).unwrap(), set.clone());
            if !set.is_empty() {
                prop_assert_eq!(CpuSet::parse_mask(&set.to_mask(8)).unwrap(), set.clone());
            }
            prop_assert_eq!(set.len(), cpus.len());
        }
    }
}
