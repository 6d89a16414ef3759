//! InfluxDB line protocol: [`build`] writes it (the agent's reports).

pub mod build;

pub use build::{Line, LineWriter, Value};
