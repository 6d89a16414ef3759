//! multipathd's JSON (`list maps json`, `show map NAME json`): maps, their path groups and
//! paths as multipathd prints them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::strip_prompts;
use crate::sources::ParseError;

/// A path in multipathd's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JsonPath {
    /// Kernel name.
    pub dev: String,
    /// `major:minor`.
    #[serde(default)]
    pub dev_t: Option<String>,
    /// Kernel state: `active`, `failed`.
    #[serde(default)]
    pub dm_st: Option<String>,
    /// sysfs device state.
    #[serde(default)]
    pub dev_st: Option<String>,
    /// Checker state.
    #[serde(default)]
    pub chk_st: Option<String>,
    /// Checker name (`tur`, `directio`, …).
    #[serde(default)]
    pub checker: Option<String>,
    /// Path priority.
    #[serde(default)]
    pub pri: Option<i64>,
    /// Marginal-path state (newer versions).
    #[serde(default)]
    pub marginal_st: Option<String>,
    /// Transport identifiers and other fields, as printed.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A path group in multipathd's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JsonGroup {
    /// Selector and arguments.
    #[serde(default)]
    pub selector: Option<String>,
    /// Group priority.
    #[serde(default)]
    pub pri: Option<i64>,
    /// `active`, `enabled`, `disabled`.
    #[serde(default)]
    pub dm_st: Option<String>,
    /// 1-based group number.
    #[serde(default)]
    pub group: Option<u32>,
    /// Paths.
    #[serde(default)]
    pub paths: Vec<JsonPath>,
}

/// A map in multipathd's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JsonMap {
    /// Alias.
    pub name: String,
    /// WWID.
    #[serde(default)]
    pub uuid: Option<String>,
    /// `dm-N`.
    #[serde(default)]
    pub sysfs: Option<String>,
    /// Queueing policy (`off`, `on`, `5 chk`).
    #[serde(default)]
    pub queueing: Option<String>,
    /// Number of usable paths as multipathd counts them.
    #[serde(default)]
    pub paths: Option<i64>,
    /// Kernel map state.
    #[serde(default)]
    pub dm_st: Option<String>,
    /// Feature string.
    #[serde(default)]
    pub features: Option<String>,
    /// Hardware handler.
    #[serde(default)]
    pub hwhandler: Option<String>,
    /// Path failures multipathd has seen.
    #[serde(default)]
    pub path_faults: Option<u64>,
    /// Vendor (space-padded as the device reports it).
    #[serde(default)]
    pub vend: Option<String>,
    /// Product (space-padded).
    #[serde(default)]
    pub prod: Option<String>,
    /// Path-group switches.
    #[serde(default)]
    pub switch_grp: Option<u64>,
    /// Table loads.
    #[serde(default)]
    pub map_loads: Option<u64>,
    /// Path groups.
    #[serde(default)]
    pub path_groups: Vec<JsonGroup>,
    /// Other fields, as printed.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// One JSON document of a reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum JsonDoc {
    /// `{"major_version":…, "maps":[…]}` or `{…, "map":{…}}`.
    Maps {
        /// Format version `major.minor`.
        version: (u64, u64),
        /// The maps.
        maps: Vec<JsonMap>,
    },
    /// A bare map object.
    Map(JsonMap),
    /// A bare path object.
    Path(JsonPath),
}

fn json_error(text: &str, e: &serde_json::Error) -> ParseError {
    let line = e.line().max(1);
    ParseError::new(line, text.lines().nth(line - 1).unwrap_or(""), e)
}

/// Parses multipathd JSON replies: one or more documents (whole replies, or map or path
/// objects), prompt lines allowed.
pub fn parse_json(text: &str) -> Result<Vec<JsonDoc>, ParseError> {
    let text = strip_prompts(text);
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>();
    for v in stream {
        let v = v.map_err(|e| json_error(&text, &e))?;
        let conv = |v: serde_json::Value| -> Result<JsonDoc, serde_json::Error> {
            if v.get("major_version").is_some() {
                let num = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
                let version = (num("major_version"), num("minor_version"));
                let maps = match (v.get("maps"), v.get("map")) {
                    (Some(m), _) => Vec::<JsonMap>::deserialize(m)?,
                    (None, Some(m)) => vec![JsonMap::deserialize(m)?],
                    (None, None) => Vec::new(),
                };
                Ok(JsonDoc::Maps { version, maps })
            } else if v.get("dev").is_some() {
                Ok(JsonDoc::Path(JsonPath::deserialize(v)?))
            } else {
                Ok(JsonDoc::Map(JsonMap::deserialize(v)?))
            }
        };
        out.push(conv(v).map_err(|e| ParseError::new(1, "", format!("JSON shape: {e}")))?);
    }
    Ok(out)
}

/// All maps of a JSON reply (the `maps` list, the single `map`, or bare map objects).
pub fn json_maps(docs: Vec<JsonDoc>) -> Vec<JsonMap> {
    let mut out = Vec::new();
    for d in docs {
        match d {
            JsonDoc::Maps { maps, .. } => out.extend(maps),
            JsonDoc::Map(m) => out.push(m),
            JsonDoc::Path(_) => {}
        }
    }
    out
}
