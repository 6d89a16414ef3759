//! Labels a Prometheus series carries under another name than the InfluxQL tag of the same
//! table column. A batch job's id is `batch_job`: Prometheus keeps `job` for the scrape job,
//! which every generated table drops. A table whose PromQL groups by `batch_job` shows it under
//! the InfluxQL tag's name `job`, where the InfluxQL table's column order, header and width put
//! it (else it lands after every known column, beyond the right edge at 1600 px).

use std::collections::BTreeMap;

/// Prometheus label -> the InfluxQL tag of the same column.
pub const RENAMED_LABELS: [(&str, &str); 1] = [("batch_job", "job")];

/// The renames (`renameByName` of the table's first organize, which drops the scrape job's
/// `job` by its original name before it renames) a table needs whose targets are `exprs`.
pub fn table_label_renames<'a>(
    exprs: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, String> {
    let exprs: Vec<&str> = exprs.into_iter().collect();
    RENAMED_LABELS
        .iter()
        .filter(|(from, _)| exprs.iter().any(|e| has_label(e, from)))
        .map(|(from, to)| (from.to_string(), to.to_string()))
        .collect()
}

fn has_label(expr: &str, label: &str) -> bool {
    expr.match_indices(label).any(|(i, _)| {
        let before = expr[..i].chars().next_back();
        let after = expr[i + label.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !word(before) && !word(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_job_is_shown_as_job() {
        let r = table_label_renames(["avg by (batch, batch_job, slot) (x)"]);
        assert_eq!(r.get("batch_job").map(String::as_str), Some("job"));
        assert!(table_label_renames(["max by (host) (storwatch_job_batch_jobs)"]).is_empty());
        assert!(table_label_renames(["max by (job) (x)"]).is_empty());
    }
}
