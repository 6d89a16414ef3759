//! `agent/src/prometheus/help.rs`: the HELP line of every metric family the agent's `/metrics`
//! can serve, from the contract's `help` of each numeric field and, for a measurement's `_info`
//! family, the string fields it carries as labels.

use std::collections::BTreeMap;

use storwatch_contract::{Contract, FieldType};

use crate::Output;

pub(crate) const PATH: &str = "agent/src/prometheus/help.rs";

/// Family name -> HELP, sorted by name (the exposition looks names up by binary search).
pub(crate) fn families(c: &Contract) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in c.measurements() {
        let mut labels = Vec::new();
        for f in &m.fields {
            if f.ty == FieldType::String {
                labels.push(f.name.as_str());
            } else if let Some(h) = &f.help {
                out.entry(f.prom.clone()).or_insert_with(|| h.clone());
            }
        }
        if !labels.is_empty() {
            out.insert(
                storwatch_wire::prom::metric_name(&m.name) + "_info",
                format!(
                    "States of storwatch's {} series as labels: {} (always 1).",
                    m.name,
                    labels.join(", ")
                ),
            );
        }
    }
    out
}

pub(crate) fn output(c: &Contract) -> Output {
    let mut text = String::from(
        "//! HELP of every metric family of the agent's `/metrics`: generated from the metric\n\
         //! contract (`contract/*.yaml`) by `cargo xtask gen`; edit the contract, not this file.\n\
         \n\
         /// (family name, HELP), sorted by name.\n\
         #[rustfmt::skip]\n\
         pub(crate) const HELP: &[(&str, &str)] = &[\n",
    );
    for (name, help) in families(c) {
        text.push_str(&format!("    ({name:?}, {help:?}),\n"));
    }
    text.push_str("];\n");
    Output {
        path: PATH.to_string(),
        text,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_numeric_field_has_its_help_and_strings_make_info() {
        let c = Contract::workspace();
        let f = families(&c);
        assert!(f["storwatch_disk_read_await_seconds"].contains("read"));
        assert!(f["storwatch_md_info"].contains("state"));
        let sorted: Vec<&String> = f.keys().collect();
        assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        assert!(output(&c)
            .text
            .contains("(\"storwatch_md_rebuild_risk\", \""));
    }
}
