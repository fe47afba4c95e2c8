//! The JSON convention's "none is `null`" for values whose type has an
//! empty value of its own (docs/operations.md, "The JSON convention"):
//! an empty CPU set or an empty label is written `null`, and read back
//! from `null` or from the empty form older versions wrote. Use as
//! `#[serde(with = "crate::json_null::cpus")]`.

/// A CPU set: `null` when empty, else its list.
pub mod cpus {
    use crate::cpulist::CpuSet;
    use serde::{Deserialize, Deserializer, Serializer};

    /// `null` when empty, else the list.
    pub fn serialize<S: Serializer>(set: &CpuSet, s: S) -> Result<S::Ok, S::Error> {
        if set.is_empty() {
            s.serialize_none()
        } else {
            s.serialize_str(&set.to_string())
        }
    }

    /// `null`, `""` or a list.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        CpuSet::parse_list(&text).map_err(serde::de::Error::custom)
    }
}

/// A text: `null` when empty.
pub mod text {
    use serde::{Deserialize, Deserializer, Serializer};

    /// `null` when empty, else the text.
    pub fn serialize<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
        if text.is_empty() {
            s.serialize_none()
        } else {
            s.serialize_str(text)
        }
    }

    /// `null` or a text.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use crate::cpulist::CpuSet;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Both {
        #[serde(with = "super::cpus")]
        cpus: CpuSet,
        #[serde(with = "super::text")]
        label: String,
    }

    #[test]
    fn none_is_null_and_reads_back_from_null_or_empty() {
        let none = Both {
            cpus: CpuSet::new(),
            label: String::new(),
        };
        assert_eq!(
            serde_json::to_string(&none).unwrap(),
            r#"{"cpus":null,"label":null}"#
        );
        let old: Both = serde_json::from_str(r#"{"cpus":"","label":""}"#).unwrap();
        assert_eq!(old, none);
        let some = Both {
            cpus: CpuSet::parse_list("2-3").unwrap(),
            label: "irqs".into(),
        };
        let text = serde_json::to_string(&some).unwrap();
        assert_eq!(text, r#"{"cpus":"2-3","label":"irqs"}"#);
        assert_eq!(serde_json::from_str::<Both>(&text).unwrap(), some);
    }
}
