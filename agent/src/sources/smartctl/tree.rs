//! The members of a smartctl document the parser reads, and nothing else: a tree shaped by
//! [`DOC`], built while serde_json parses the text.
//!
//! A `smartctl -a` document is 4–60 kB of which the parser reads a few dozen numbers and
//! strings. A whole `serde_json::Value` of it (every member's key and string copied, every
//! object a map) was most of what reading a drive cost; here a member the shape does not name
//! is parsed and dropped as it is read (no key, string or node kept), and a string that
//! needs no unescaping is borrowed from the text.
//!
//! The answers are those of the `Value` the parser used before: every member is parsed by the
//! same `deserialize_any` as a `Value` is (so the same text is refused, with the same error:
//! a malformed number, a bad escape, nesting past serde_json's limit, also in members not
//! kept), and a kept member answers [`Node::get`], [`Node::as_u64`], … as `Value`'s methods
//! of those names do (a later duplicate key wins, `-0` and fractions are no integer, an
//! integer past `u64` is a float). Where a member has another type than the shape expects
//! (an object where a string was wanted, an array where an object was), an empty node of the
//! type found is kept: it is present, and answers no read, as the `Value` did.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Which members of an object, and which elements of an array, are kept.
#[derive(Debug)]
pub(super) struct Shape {
    /// The members kept when the value is an object, each with its own shape.
    pub(super) keys: &'static [(&'static str, Shape)],
    /// The shape of each element when the value is an array; `None`: none kept.
    pub(super) elements: Option<&'static Shape>,
}

/// A number, string, bool or null: kept as it is; an object or array: kept empty.
const LEAF: Shape = Shape {
    keys: &[],
    elements: None,
};

const fn object(keys: &'static [(&'static str, Shape)]) -> Shape {
    Shape {
        keys,
        elements: None,
    }
}

const fn array(of: &'static Shape) -> Shape {
    Shape {
        keys: &[],
        elements: Some(of),
    }
}

const UNCORRECTED: Shape = object(&[("total_uncorrected_errors", LEAF)]);

/// What [`super::parse`] and [`super::output::parse`] read of a document (smartctl's JSON
/// or smartd's state file): the fields listed at the top of [`super`].
pub(super) const DOC: Shape = object(&[
    ("json_format_version", array(&LEAF)),
    (
        "smartctl",
        object(&[
            ("version", array(&LEAF)),
            ("exit_status", LEAF),
            (
                "messages",
                array(&object(&[("severity", LEAF), ("string", LEAF)])),
            ),
        ]),
    ),
    (
        "device",
        object(&[("name", LEAF), ("type", LEAF), ("protocol", LEAF)]),
    ),
    ("device_info", LEAF),
    ("model_name", LEAF),
    ("scsi_model_name", LEAF),
    ("vendor", LEAF),
    ("product", LEAF),
    ("serial_number", LEAF),
    ("firmware_version", LEAF),
    ("scsi_revision", LEAF),
    ("revision", LEAF),
    ("wwn", object(&[("naa", LEAF), ("oui", LEAF), ("id", LEAF)])),
    ("user_capacity", object(&[("bytes", LEAF)])),
    ("nvme_total_capacity", LEAF),
    ("rotation_rate", LEAF),
    ("smart_status", object(&[("passed", LEAF)])),
    ("temperature", object(&[("current", LEAF)])),
    ("power_on_time", object(&[("hours", LEAF)])),
    ("power_mode", object(&[("name", LEAF)])),
    (
        "ata_smart_attributes",
        object(&[(
            "table",
            array(&object(&[
                ("id", LEAF),
                ("raw", object(&[("value", LEAF)])),
                ("when_failed", LEAF),
            ])),
        )]),
    ),
    ("scsi_grown_defect_list", LEAF),
    (
        "scsi_error_counter_log",
        object(&[
            ("read", UNCORRECTED),
            ("write", UNCORRECTED),
            ("verify", UNCORRECTED),
            ("non_medium_error", object(&[("count", LEAF)])),
        ]),
    ),
    (
        "nvme_smart_health_information_log",
        object(&[
            ("critical_warning", LEAF),
            ("available_spare", LEAF),
            ("available_spare_threshold", LEAF),
            ("percentage_used", LEAF),
            ("media_errors", LEAF),
            ("unsafe_shutdowns", LEAF),
            ("temperature", LEAF),
            ("power_on_hours", LEAF),
        ]),
    ),
]);

/// One kept JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    /// A non-negative integer (serde_json's `PosInt`).
    Pos(u64),
    /// A negative integer (`NegInt`).
    Neg(i64),
    /// A number with a fraction or exponent, `-0`, or an integer past `u64` (never read).
    Float,
    Str(Cow<'a, str>),
    /// The kept elements of an array (none when its shape keeps none).
    Array(Vec<Node<'a>>),
    /// The kept members of an object, in the document's order.
    Object(Vec<(&'static str, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// The member `key` of an object (the last, when the key is repeated); `None` for any
    /// other value (`Value::get` with a string).
    pub(super) fn get(&self, key: &str) -> Option<&Node<'a>> {
        match self {
            Node::Object(m) => m.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Whether it is an object holding `key` (whatever its value).
    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub(super) fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }

    pub(super) fn as_u64(&self) -> Option<u64> {
        match self {
            Node::Pos(n) => Some(*n),
            _ => None,
        }
    }

    pub(super) fn as_i64(&self) -> Option<i64> {
        match self {
            Node::Pos(n) => i64::try_from(*n).ok(),
            Node::Neg(n) => Some(*n),
            _ => None,
        }
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn as_bool(&self) -> Option<bool> {
        match self {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub(super) fn as_array(&self) -> Option<&[Node<'a>]> {
        match self {
            Node::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Parses `json` as one JSON value (nothing but whitespace after it), keeping what `shape`
/// names: the errors of `serde_json::from_str::<Value>` on the same text.
pub(super) fn parse<'a>(json: &'a str, shape: &'static Shape) -> serde_json::Result<Node<'a>> {
    let mut de = serde_json::Deserializer::from_str(json);
    let node = Seed(shape).deserialize(&mut de)?;
    de.end()?;
    Ok(node)
}

/// A value to keep, in `shape`.
struct Seed(&'static Shape);

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
        Ok(Node::Pos(n))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
        // as serde_json's `Number::from(i64)`: a non-negative one is a `PosInt`
        Ok(u64::try_from(n).map_or(Node::Neg(n), Node::Pos))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Node<'de>, E> {
        Ok(Node::Float)
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let mut out = Vec::new();
        match self.0.elements {
            Some(shape) => {
                while let Some(n) = seq.next_element_seed(Seed(shape))? {
                    out.push(n);
                }
            }
            None => while seq.next_element::<Skip>()?.is_some() {},
        }
        Ok(Node::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let keys = self.0.keys;
        let mut out = Vec::new();
        while let Some(found) = map.next_key_seed(Key(keys))? {
            match found {
                Some(i) => {
                    let (name, shape) = &keys[i];
                    out.push((*name, map.next_value_seed(Seed(shape))?));
                }
                None => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(Node::Object(out))
    }
}

/// A member's key: which of the shape's keys it is, if any.
struct Key(&'static [(&'static str, Shape)]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|(k, _)| *k == s))
    }
}

/// A value parsed and dropped: checked as a `Value` would be, nothing kept. (Not
/// `serde::de::IgnoredAny`: serde_json skips that without its nesting limit or its number
/// checks, so a document a `Value` refuses would pass.)
struct Skip;

impl<'de> de::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(Skip)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}
