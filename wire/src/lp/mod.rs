//! InfluxDB line protocol, written and read by one set of rules:
//!
//! * [`rules`] — the InfluxDB versions ([`Backend`]), what each part of a line escapes, the key
//!   size limit, how a value is made representable;
//! * [`build`] — the writer the agent builds its reports with;
//! * [`parse`] — one line into a [`Point`];
//! * [`check`] — a write body split into numbered lines, each checked against the limits and
//!   its timestamp converted to nanoseconds: the collector's validation.

pub mod build;
pub mod check;
pub mod parse;
pub mod rules;

pub use build::{Line, LineWriter, Value};
pub use check::{check_line, lines, Accepted, Checked, LineLimits, Precision, Rejection};
pub use parse::{parse_line, FieldType, FieldValue, Point};
pub use rules::Backend;
