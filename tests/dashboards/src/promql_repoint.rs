//! An InfluxQL dashboard's references turned to the Prometheus side: its datasources to the
//! Prometheus datasource, its links to the other dashboards' Prometheus twins.

use serde_json::{json, Value as Json};

/// Every datasource reference of InfluxDB made one to the Prometheus datasource variable.
pub fn repoint_datasources(v: &mut Json) {
    match v {
        Json::Object(m) => {
            if m.get("type").and_then(Json::as_str) == Some("influxdb") && m.contains_key("uid") {
                m.insert("type".into(), json!("prometheus"));
            }
            for x in m.values_mut() {
                repoint_datasources(x);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(repoint_datasources),
        _ => {}
    }
}

/// The Prometheus uid of an InfluxQL dashboard's uid.
pub fn prom_uid(uid: &str) -> String {
    format!("{uid}-prom")
}

/// Links to other storwatch dashboards re-pointed to their `-prom` twins.
pub fn repoint_links(v: &mut Json, uids: &[String]) {
    match v {
        Json::String(s) => {
            for uid in uids {
                let from = format!("/d/{uid}");
                if s.contains(&from) && !s.contains(&format!("/d/{uid}-prom")) {
                    *s = s.replace(&from, &format!("/d/{}", prom_uid(uid)));
                }
            }
            // the retention policy is InfluxDB's
            for rp in [
                "&var-rp=${rp}",
                "&var-rp=$rp",
                "var-rp=${rp}&",
                "var-rp=$rp&",
            ] {
                *s = s.replace(rp, "");
            }
            for rp in ["?var-rp=${rp}", "?var-rp=$rp"] {
                *s = s.replace(rp, "");
            }
        }
        Json::Object(m) => m.values_mut().for_each(|x| repoint_links(x, uids)),
        Json::Array(a) => a.iter_mut().for_each(|x| repoint_links(x, uids)),
        _ => {}
    }
}
