//! One segment of the journal read back: every record that parses whole,
//! in order, each with its number, and what could not be read of it (a
//! list cut short, an element that is JSON but no record, a record whose
//! checksum does not match or was taken away). A record is used whole or
//! not at all, so `off` never acts on part of one.

use super::entry::{Entry, REASON_BYTES};
use super::entry::{Read, ALTERED};
use crate::input::brief_to;

/// The records of one segment that parse whole, in order, and what could
/// not be read of it (`None` for an intact segment).
pub(super) fn parse_segment(data: &[u8]) -> (Vec<Entry>, Option<String>) {
    let (entries, problem) = parse_numbered(data);
    (entries.into_iter().map(|(_, e)| e).collect(), problem)
}

/// [`parse_segment`], each record with its number in the segment (from 1).
/// A segment is written whole by one cpushield: when some of its records
/// carry a checksum, one without is a record whose checksum was taken
/// away, and is not read either.
pub(super) fn parse_numbered(data: &[u8]) -> (Vec<(usize, Entry)>, Option<String>) {
    let mut lenient = Lenient::default();
    if let Ok(all) = serde_json::from_slice::<Vec<Read>>(data) {
        lenient.read = all.len();
        lenient.entries = all
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i + 1, r))
            .collect();
        if !lenient.unsealed_among_sealed() {
            return (lenient.into_entries(), None);
        }
        let reason = lenient.reasons(Ok(())).join("; ");
        return (lenient.into_entries(), Some(reason));
    }
    let mut de = serde_json::Deserializer::from_slice(data);
    let whole = serde::Deserializer::deserialize_seq(&mut de, &mut lenient).and_then(|()| de.end());
    lenient.unsealed_among_sealed();
    let reasons = lenient.reasons(whole);
    let reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    (lenient.into_entries(), reason)
}

/// "record 3" or "records 3, 5 and 2 more" of `numbers` (1-based).
fn numbered(numbers: &[usize]) -> String {
    let shown: Vec<String> = numbers.iter().take(5).map(|n| n.to_string()).collect();
    format!(
        "{} {}{}",
        if numbers.len() == 1 {
            "record"
        } else {
            "records"
        },
        shown.join(", "),
        if numbers.len() > 5 {
            format!(" and {} more", numbers.len() - 5)
        } else {
            String::new()
        }
    )
}

impl Lenient {
    /// Drops the records without a checksum when others of the segment
    /// have one (see [`parse_numbered`]); whether there were any.
    fn unsealed_among_sealed(&mut self) -> bool {
        if !self.entries.iter().any(|(_, r)| r.sealed) {
            return false;
        }
        let unsealed: Vec<usize> = (self.entries.iter())
            .filter(|(_, r)| !r.sealed)
            .map(|(n, _)| *n)
            .collect();
        self.entries.retain(|(_, r)| r.sealed);
        self.unsealed = unsealed;
        !self.unsealed.is_empty()
    }

    /// The records read, numbered.
    fn into_entries(self) -> Vec<(usize, Entry)> {
        self.entries
            .into_iter()
            .map(|(n, r)| (n, r.entry))
            .collect()
    }

    /// What could not be read, given how reading the list ended (`whole`).
    fn reasons(&self, whole: Result<(), serde_json::Error>) -> Vec<String> {
        let mut reasons = Vec::new();
        let of = self.read;
        if !self.altered.is_empty() {
            let n = numbered(&self.altered);
            reasons.push(format!(
                "{n} of {of}: {ALTERED} (the checksum does not match)"
            ));
        }
        if !self.unsealed.is_empty() {
            let n = numbered(&self.unsealed);
            reasons.push(format!(
                "{n} of {of}: no checksum, though the segment's other records carry one (taken away after it was written)"
            ));
        }
        self.foreign_and_cut(whole, &mut reasons);
        reasons
    }

    /// The records that are JSON but no record, and where the list
    /// could not be read on (given how reading it ended: `whole`).
    fn foreign_and_cut(&self, whole: Result<(), serde_json::Error>, reasons: &mut Vec<String>) {
        if !self.foreign.is_empty() {
            reasons.push(format!(
                "{} of {} {} ({})",
                numbered(&self.foreign),
                self.read,
                if self.foreign.len() == 1 {
                    "is not a cpushield record"
                } else {
                    "are not cpushield records"
                },
                brief_to(&self.first_foreign, REASON_BYTES),
            ));
        }
        match (&self.cut, whole) {
            (Some(reason), _) => reasons.push(format!(
                "record {} and every record after it cannot be read ({})",
                self.read + 1,
                brief_to(reason, REASON_BYTES)
            )),
            (None, Err(e)) if self.read == 0 => reasons.push(format!(
                "every record: the file does not parse ({})",
                brief_to(&e.to_string(), REASON_BYTES)
            )),
            (None, Err(e)) => reasons.push(format!(
                "bytes after its {} records do not parse ({})",
                self.read,
                brief_to(&e.to_string(), REASON_BYTES)
            )),
            (None, Ok(())) => {}
        }
    }
}

/// Reads a segment's list one element at a time: an element that is JSON
/// but no record is skipped, the first that is not JSON ends the list.
#[derive(Default)]
struct Lenient {
    /// The records read whole, each with its number.
    entries: Vec<(usize, Read)>,
    /// Elements read whole (records or not).
    read: usize,
    /// 1-based numbers of the elements that are JSON but no record.
    foreign: Vec<usize>,
    /// 1-based numbers of the records whose checksum does not match.
    altered: Vec<usize>,
    /// 1-based numbers of the records without a checksum among records
    /// with one.
    unsealed: Vec<usize>,
    /// Why the first of them is not a record.
    first_foreign: String,
    /// Why the list could not be read on after `read` elements.
    cut: Option<String>,
}

impl<'de> serde::de::Visitor<'de> for &mut Lenient {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of journal records")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            match seq.next_element::<serde_json::Value>() {
                Ok(Some(value)) => {
                    self.read += 1;
                    match serde_json::from_value::<Read>(value) {
                        Ok(read) => self.entries.push((self.read, read)),
                        Err(e) if e.to_string().starts_with(ALTERED) => {
                            self.altered.push(self.read)
                        }
                        Err(e) => {
                            if self.foreign.is_empty() {
                                self.first_foreign = e.to_string();
                            }
                            self.foreign.push(self.read);
                        }
                    }
                }
                Ok(None) => return Ok(()),
                Err(e) => {
                    // What follows cannot be told apart from the damage:
                    // none of it is used.
                    self.cut = Some(e.to_string());
                    return Ok(());
                }
            }
        }
    }
}
