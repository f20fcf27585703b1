//! 64-bit identifiers (test ids, seeds, cookies) as JSON strings.
//!
//! JSON numbers are IEEE doubles to most readers: jq, JavaScript and
//! Python's `json` with floats lose the digits of an integer past 2^53
//! (`jq .seed` prints 1795737823123456800 for 1795737823123456789). An
//! identifier only needs to compare equal, so it is written as a string
//! of its decimal digits. Reading accepts the string or, from files
//! written before, the number.
//!
//! `#[serde(with = "crate::base::json_id")]` on a `u64`;
//! `#[serde(with = "crate::base::json_id::option")]` on an `Option<u64>`.

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;

pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(IdVisitor)
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an identifier: a string of decimal digits, or a whole number")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("identifier '{v}' is negative")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        v.parse().map_err(|_| {
            E::custom(format!(
                "identifier '{v}' is not a whole number from 0 to {}",
                u64::MAX
            ))
        })
    }
}

/// The same for an optional identifier (`null` when absent).
pub mod option {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match id {
            Some(id) => s.collect_str(id),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Id(#[serde(with = "super")] u64);
        Ok(Option::<Id>::deserialize(d)?.map(|Id(id)| id))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Doc {
        #[serde(with = "super")]
        id: u64,
        #[serde(with = "super::option", default)]
        cookie: Option<u64>,
    }

    #[test]
    fn ids_past_2_53_survive_a_reader_that_parses_numbers_as_doubles() {
        let doc = Doc {
            id: 0xdead_beef_0bad_f00d,
            cookie: Some(u64::MAX),
        };
        let text = serde_json::to_string(&doc).expect("json");
        assert_eq!(
            text,
            r#"{"id":"16045690981293355021","cookie":"18446744073709551615"}"#
        );
        // What jq does with a number: the digits past 2^53 are lost.
        assert_eq!(doc.id as f64 as u64, 16_045_690_981_293_355_008);
        assert_eq!(serde_json::from_str::<Doc>(&text).expect("back"), doc);
    }

    #[test]
    fn files_written_with_numbers_are_still_read() {
        let doc: Doc = serde_json::from_str(r#"{"id": 42, "cookie": null}"#).expect("old");
        assert_eq!((doc.id, doc.cookie), (42, None));
        let doc: Doc = serde_json::from_str(r#"{"id": 7}"#).expect("no cookie");
        assert_eq!(doc.cookie, None);
        for bad in [r#"{"id": "x1"}"#, r#"{"id": -1}"#, r#"{"id": 1.5}"#] {
            assert!(serde_json::from_str::<Doc>(bad).is_err(), "{bad}");
        }
    }
}
