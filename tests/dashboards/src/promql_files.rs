//! The Prometheus dashboards' files and the walk over their panels, shared by the generator
//! ([`crate::promql_dashboards`]) and the list of their queries ([`crate::promql_queries`]).

use std::path::Path;

use serde_json::Value as Json;

/// The dashboards that have a Prometheus counterpart, in `dashboards/`.
pub const FILES: [&str; 4] = [
    "disk-server.json",
    "site-overview.json",
    "storage-health.json",
    "worker-node.json",
];

/// A JSON file read whole; a file that cannot be read or parsed is a panic naming it.
pub fn read_json(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel of `panels`, rows' nested panels included, given to `f`.
pub fn walk_panels_mut(panels: &mut [Json], f: &mut dyn FnMut(&mut Json)) {
    for p in panels {
        f(p);
        if let Some(inner) = p.get_mut("panels").and_then(Json::as_array_mut) {
            walk_panels_mut(inner, f);
        }
    }
}

pub fn walk_panels<'a>(panels: &'a [Json], out: &mut Vec<&'a Json>) {
    for p in panels {
        out.push(p);
        if let Some(inner) = p.get("panels").and_then(Json::as_array) {
            walk_panels(inner, out);
        }
    }
}
