//! InfluxDB line protocol, written and read by one set of rules:
//!
//! * [`rules`] — the InfluxDB versions ([`Backend`]) and how each answers a write, what each
//!   part of a line escapes, reserved names, the key limit, how a value is made representable;
//! * [`build`] — the writer the agent builds its reports with;
//! * [`scan`] (private) and [`parse`] — one line into a [`Point`], by the grammar of each
//!   version: the Go parser's for 1.x and 2.x, InfluxDB 3's own for 3.x;
//! * [`view`] — the same reading without building anything: where a line's parts are, names
//!   unescaped and values read only when asked (the collector reads every line this way);
//!   a plain line (no escapes) is read in one pass by [`plain`] (private), which
//!   [`view_plain`] offers with its fields and values told as they are read;
//! * [`precision`] — the `precision` parameter and the timestamp range of each version;
//! * [`check`] — a write body split into numbered lines, each checked by the rules of every
//!   version it goes to and against the collector's limits: the collector's validation.

pub mod build;
pub mod check;
mod line_end;
pub mod parse;
mod plain;
pub mod precision;
pub mod rules;
mod scan;
pub mod view;

pub use build::{
    EncodedFields, FieldKey, FieldText, Fields, FieldsMark, Line, LineWriter, SeriesKey, Value,
};
pub use check::{
    check_line, check_line_typed, lines, Accepted, Checked, Kind, LineLimits, Rejection,
};
pub use parse::{parse_line, FieldType, FieldValue, Point};
pub use plain::{on_field, plain_number, plain_timestamp, OnField, PlainFields};
pub use precision::{Api, Precision};
pub use rules::{Backend, Backends};
pub use view::{parse_view, parse_view_typed, view_plain, FieldRef, FieldTypes, LineView, Parsed};
