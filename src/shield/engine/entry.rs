//! One record of the journal, as it is written and read: the change, its
//! component, the value it replaced, when; its checksum; and the layout of
//! version 1, still read.
//!
//! Each record this cpushield writes carries a checksum of itself under
//! [`SUM_KEY`] (an optional field: a cpushield without it reads the record
//! as before, and records written before it, without one, are read and
//! undone as they were). A record whose checksum does not match what it
//! holds was altered or torn after it was written: it is not read as
//! written, and `off` names it (exit 5).

use serde::{Deserialize, Serialize};

use super::change::Action;

/// One recorded change.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Entry {
    /// The change.
    #[serde(flatten)]
    pub action: Action,
    /// The component that planned it (its name); `None` in a journal of
    /// version 1, which did not record it.
    #[serde(default, rename = "by", skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// For writes undone with the previous value: that value, read just before.
    #[serde(default, rename = "prior", skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// When it was journaled, in clock ticks since boot (the unit of a
    /// thread's start time in `/proc/TID/stat`). A thread id that names a
    /// thread started later is a recycled id: undo leaves that thread alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

/// The version of the journal this cpushield writes: 3 keeps what each
/// component records of the shield under its name in the state's `parts`;
/// 2 recorded each entry's component (`by`) and a component's own action
/// under `own`, and kept the records at the top level of the state.
/// Versions 1 (no `by`; a component's own action at the top level under
/// its own tag) and 2 are still read and undone.
pub const VERSION: u32 = 3;

/// The tags under which a journal of version 1 wrote the components' own
/// actions at the top level of an entry (a fact of that format, frozen):
/// read into [`Action::Own`], whose component knows them by their tag.
/// Any other unknown tag is damage.
const VERSION_1_OWN_TAGS: [&str; 4] = [
    "irqbalance_ban",
    "mount_resctrl",
    "resctrl_schemata",
    "guard",
];

/// The key of a record's checksum: the CRC-32 (IEEE) of the record's
/// JSON as this cpushield serialises it without the key (compact, its
/// fields in their order), as 8 lower-case hex digits. Not a seal against
/// whoever may write the journal (they could compute it too; the run
/// directory being root's alone is that): it tells a record altered by
/// hand, garbled or torn from the one written.
pub const SUM_KEY: &str = "crc32";

/// At most this many bytes of a parser's message are shown (a garbled
/// record can make it quote anything).
pub(super) const REASON_BYTES: usize = 160;

/// How the error of a record whose checksum does not match begins.
pub(super) const ALTERED: &str = "altered after it was written";

/// The bytes of `entry` as the journal writes them: its JSON, with its
/// checksum under [`SUM_KEY`] as its last field.
pub(super) fn sealed<E: Serialize>(entry: &E) -> Vec<u8> {
    let mut body = serde_json::to_vec(entry).expect("entries serialise");
    let sum = crc32fast::hash(&body);
    if body.last() == Some(&b'}') {
        body.pop();
        if body.len() > 1 {
            body.push(b',');
        }
        body.extend_from_slice(format!("\"{SUM_KEY}\":\"{sum:08x}\"}}").as_bytes());
    }
    body
}

/// A record as read: the entry, and whether it carried a checksum (that
/// matched: one that does not is an error).
#[derive(Debug)]
pub(super) struct Read {
    /// The entry.
    pub(super) entry: Entry,
    /// It carried a checksum.
    pub(super) sealed: bool,
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Read::deserialize(d).map(|r| r.entry)
    }
}

impl<'de> Deserialize<'de> for Read {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        use serde_json::Value;
        let mut map = serde_json::Map::<String, Value>::deserialize(d)?;
        let mut text = |key: &str| match map.remove(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            None | Some(Value::Null) => Ok(None),
            // A damaged record can hold anything there: quote a prefix.
            Some(other) => Err(D::Error::custom(format!(
                "{key}: not a string: {}",
                crate::input::brief_to(&other.to_string(), 60)
            ))),
        };
        let previous = text("prior")?;
        let owner = text("by")?;
        let sum = text(SUM_KEY)?;
        let at = match map.remove("at") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| D::Error::custom("at: not a count"))?,
            ),
        };
        let tag = map
            .get("action")
            .and_then(Value::as_str)
            .map(str::to_string);
        let value = Value::Object(map);
        let action = match tag {
            Some(tag) if VERSION_1_OWN_TAGS.contains(&tag.as_str()) => Action::Own {
                owner: String::new(),
                payload: super::change::Payload(value),
            },
            _ => serde_json::from_value(value).map_err(D::Error::custom)?,
        };
        let entry = Entry {
            action,
            owner,
            previous,
            at,
        };
        if let Some(sum) = &sum {
            // What was read, serialised as it was written, must be what
            // the checksum was made of.
            let body = serde_json::to_vec(&entry).map_err(D::Error::custom)?;
            let now = format!("{:08x}", crc32fast::hash(&body));
            if &now != sum {
                return Err(D::Error::custom(format!(
                    "{ALTERED} (its {SUM_KEY} is {}, its content's {now})",
                    crate::input::brief_to(sum, 16)
                )));
            }
        }
        Ok(Read {
            entry,
            sealed: sum.is_some(),
        })
    }
}

/// An [`Entry`] that borrows its action: what `apply` journals, so that a
/// step (and the affinities of every thread it may carry) is serialised
/// without being copied first. Reads back as an [`Entry`].
#[derive(Debug, Serialize)]
pub struct EntryRef<'a> {
    /// The change.
    #[serde(flatten)]
    pub action: &'a Action,
    /// As [`Entry::owner`].
    #[serde(rename = "by", skip_serializing_if = "Option::is_none")]
    pub owner: Option<&'static str>,
    /// As [`Entry::previous`].
    #[serde(rename = "prior", skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// As [`Entry::at`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}
