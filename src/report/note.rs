//! The shield's notes ([`Note`]) as the sentences people read.

use crate::cpulist::CpuSet;
use crate::shield::Note;

/// The sentence of note `n`, as shown after `note:` in `on`'s and
/// `status`'s reports.
pub fn text(n: &Note) -> String {
    match n {
        Note::SplitSiblings { groups } => format!(
            "hyper-thread siblings split ({}): the unshielded siblings share a core with the shield; keep them idle",
            join(groups.iter().map(CpuSet::to_string), "; ")
        ),
        Note::ShieldChangedInPlace { from, to } => format!(
            "shield changed in place from CPUs {from} to {to}: the shield stayed up throughout"
        ),
        Note::TunedPins { profile, pins } => format!(
            "tuned profile '{profile}' pins CPUs or IRQs ({}): it may move threads and IRQs back onto the shield when it re-applies; use a profile without isolated_cores/banned_cpus (tuned-adm profile ...) while cpushield shields",
            pins.join(", ")
        ),
        Note::TunedOverlaps {
            profile,
            chain,
            settings,
        } => format!(
            "tuned profile '{profile}' (read through {}) sets what cpushield sets too: {}; where you ask cpushield for the same, let one of them own it (drop the key from the profile, or the knob from --tune): off puts back the value from before the shield and tuned re-applies its own",
            chain.join(", "),
            settings.join("; ")
        ),
        Note::Part(note) => note.text.clone(),
    }
}

fn join(items: impl Iterator<Item = String>, separator: &str) -> String {
    items.collect::<Vec<_>>().join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn notes_read_as_the_sentences_the_shield_printed() {
        let cases = [
            (
                Note::SplitSiblings {
                    groups: vec![cpus("1,5"), cpus("2,6")],
                },
                "hyper-thread siblings split (1,5; 2,6): the unshielded siblings share a core with the shield; keep them idle",
            ),
            (
                Note::ShieldChangedInPlace {
                    from: cpus("2-3"),
                    to: cpus("3"),
                },
                "shield changed in place from CPUs 2-3 to 3: the shield stayed up throughout",
            ),
            (
                Note::TunedPins {
                    profile: "cpu-partitioning".into(),
                    pins: vec![
                        "profile cpu-partitioning".into(),
                        "cpu-partitioning: isolated_cores".into(),
                    ],
                },
                "tuned profile 'cpu-partitioning' pins CPUs or IRQs (profile cpu-partitioning, cpu-partitioning: isolated_cores): it may move threads and IRQs back onto the shield when it re-applies; use a profile without isolated_cores/banned_cpus (tuned-adm profile ...) while cpushield shields",
            ),
        ];
        for (note, sentence) in cases {
            assert_eq!(text(&note), sentence, "{note:?}");
        }
    }
}
