//! The tables of `docs/metrics*.md` from the contract.
//!
//! Each generated table sits between a start marker naming its contract file, measurement and
//! table number and an end marker:
//!
//! ```text
//! <!-- generated from contract/md.yaml (md, table 2) by `cargo xtask gen`: edit the contract, not this table -->
//! | field | type | unit | meaning |
//! …
//! <!-- end of generated table -->
//! ```
//!
//! A row that names one tag or field is made from that name's attributes, by what each column
//! shows; a row of several names or a heading row keeps the cells the contract gives it.

use std::path::Path;

use storwatch_contract::{Contract, Measurement, Row, Table};

use crate::Output;

const START: &str = "<!-- generated from ";
const END: &str = "<!-- end of generated table -->";

fn start_marker(file: &str, m: &str, n: usize) -> String {
    format!("{START}{file} ({m}, table {n}) by `cargo xtask gen`: edit the contract, not this table -->")
}

/// One cell of a row naming one tag or field.
fn cell(m: &Measurement, row: &Row, column: &str) -> Result<String, String> {
    if let Some(t) = row.tag.as_deref() {
        let tag = m.tag(t).ok_or_else(|| format!("{}: no tag {t}", m.name))?;
        return Ok(match column {
            "kind" => "tag".to_string(),
            "name" => format!("`{t}`"),
            "meaning" => tag.meaning.clone(),
            "unit" => tag.unit.clone().unwrap_or_default(),
            "source" => tag.source.clone().unwrap_or_default(),
            _ => String::new(),
        });
    }
    let f = row.field.as_deref().unwrap_or_default();
    let field = m
        .field(f)
        .ok_or_else(|| format!("{}: no field {f}", m.name))?;
    Ok(match column {
        "kind" => "field".to_string(),
        "name" => format!("`{f}`"),
        "type" => field
            .doc_type
            .clone()
            .unwrap_or_else(|| field.ty.as_str().to_string()),
        "unit" => field.unit.clone().unwrap_or_default(),
        "meaning" => field
            .doc_meaning
            .clone()
            .unwrap_or_else(|| field.meaning.clone()),
        "source" => field.source.clone().unwrap_or_default(),
        other => return Err(format!("{}: unknown column {other:?}", m.name)),
    })
}

/// `| a | b |`, an empty cell as `| |`.
fn row_line(cells: &[String]) -> String {
    let mut s = String::from("|");
    for c in cells {
        if c.is_empty() {
            s.push_str(" |");
        } else {
            s.push(' ');
            s.push_str(c);
            s.push_str(" |");
        }
    }
    s
}

/// The table's lines, markers excluded.
pub(crate) fn render(m: &Measurement, t: &Table) -> Result<Vec<String>, String> {
    let mut lines = vec![t.header.clone(), t.separator.clone()];
    for r in &t.rows {
        let cells = match &r.cells {
            Some(cells) => cells.clone(),
            None => t
                .columns
                .iter()
                .map(|c| cell(m, r, c))
                .collect::<Result<Vec<_>, _>>()?,
        };
        lines.push(row_line(&cells));
    }
    Ok(lines)
}

/// Each metrics document with its tables made again from the contract.
pub(crate) fn outputs(root: &Path, c: &Contract) -> Result<Vec<Output>, String> {
    let mut out = Vec::new();
    let mut docs: Vec<&str> = c.domains.iter().map(|d| d.doc.as_str()).collect();
    docs.sort();
    docs.dedup();
    for doc in docs {
        let text = std::fs::read_to_string(root.join(doc)).map_err(|e| format!("{doc}: {e}"))?;
        out.push(Output {
            path: doc.to_string(),
            text: fill(doc, &text, c)?,
        });
    }
    Ok(out)
}

/// `text` with every table between markers made again; every table of the contract for this
/// document must have its markers, once.
pub(crate) fn fill(doc: &str, text: &str, c: &Contract) -> Result<String, String> {
    let mut tables = Vec::new();
    for d in c.domains.iter().filter(|d| d.doc == doc) {
        for m in &d.measurements {
            for (i, t) in m.tables.iter().enumerate() {
                tables.push((start_marker(&d.file, &m.name, i + 1), m, t, false));
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n').enumerate();
    while let Some((n, line)) = lines.next() {
        out.push_str(line);
        let trimmed = line.trim_end_matches('\n');
        if !trimmed.starts_with(START) {
            continue;
        }
        let Some(entry) = tables.iter_mut().find(|t| t.0 == trimmed) else {
            return Err(format!(
                "{doc}:{}: a generated table the contract does not have: {trimmed}",
                n + 1
            ));
        };
        if entry.3 {
            return Err(format!("{doc}:{}: {trimmed} twice", n + 1));
        }
        entry.3 = true;
        for l in render(entry.1, entry.2)? {
            out.push_str(&l);
            out.push('\n');
        }
        // skip the old table up to and including the end marker
        loop {
            match lines.next() {
                Some((_, l)) if l.trim_end_matches('\n') == END => {
                    out.push_str(l);
                    break;
                }
                Some(_) => {}
                None => return Err(format!("{doc}:{}: no {END} after the table", n + 1)),
            }
        }
    }
    if let Some(missing) = tables.iter().find(|t| !t.3) {
        return Err(format!(
            "{doc}: no place for a table of the contract: add the line {} and {END}",
            missing.0
        ));
    }
    Ok(out)
}

/// Names of the contract its document never mentions (between backticks, or as `name=` in an
/// example line): a field without a table row must be told of in the document's prose (`mem`'s
/// fields, `event`'s).
pub(crate) fn unmentioned(root: &Path, c: &Contract) -> Vec<String> {
    let mut errs = Vec::new();
    for d in &c.domains {
        let Ok(text) = std::fs::read_to_string(root.join(&d.doc)) else {
            errs.push(format!("{}: {} is not readable", d.file, d.doc));
            continue;
        };
        for m in &d.measurements {
            let names = m
                .tags
                .iter()
                .map(|t| &t.name)
                .chain(m.fields.iter().map(|f| &f.name));
            for n in names {
                let in_example =
                    text.contains(&format!(",{n}=")) || text.contains(&format!(" {n}="));
                if !text.contains(&format!("`{n}`")) && !in_example {
                    errs.push(format!(
                        "{}: {}.{n} is not in {} (no table row, no `{n}` in its text)",
                        d.file, m.name, d.doc
                    ));
                }
            }
        }
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_name_the_document_never_mentions_is_named() {
        let mut c = Contract::workspace();
        let root = crate::workspace();
        assert!(
            unmentioned(&root, &c).is_empty(),
            "{:?}",
            unmentioned(&root, &c)
        );
        let mut f = c.domains[0].measurements[0].fields[0].clone();
        f.name = "never_documented_xyz".into();
        c.domains[0].measurements[0].fields.push(f);
        let errs = unmentioned(&root, &c);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].contains("never_documented_xyz"), "{errs:?}");
    }

    #[test]
    fn empty_cells_are_written_as_the_docs_write_them() {
        let cells = ["**ATA**", "", "x"].map(String::from);
        assert_eq!(row_line(&cells), "| **ATA** | | x |");
    }

    #[test]
    fn a_table_is_made_from_the_contract_and_the_prose_kept() {
        let c = Contract::workspace();
        let d = c
            .domains
            .iter()
            .find(|d| d.file == "contract/md.yaml")
            .unwrap();
        let m = &d.measurements[0];
        let marker = start_marker(&d.file, &m.name, 2);
        let mut text = String::new();
        for (i, _) in m.tables.iter().enumerate() {
            text.push_str(&format!(
                "prose {i}\n{}\n| stale |\n{END}\n",
                start_marker(&d.file, &m.name, i + 1)
            ));
        }
        let mut others = String::new();
        for (j, m2) in d.measurements.iter().enumerate().skip(1) {
            for i in 0..m2.tables.len() {
                others.push_str(&format!(
                    "{}\n{END}\n",
                    start_marker(&d.file, &m2.name, i + 1)
                ));
            }
            let _ = j;
        }
        let out = fill(&d.doc, &format!("{text}{others}"), &c).unwrap();
        assert!(out.contains("prose 1\n"));
        assert!(!out.contains("| stale |"));
        assert!(
            out.contains(&format!("{marker}\n| field | type | unit | meaning |\n")),
            "{out}"
        );
        assert!(out.contains("| `rebuild_risk` | float |"));
        // a table of the contract without its place is named
        let err = fill(&d.doc, &text, &c).unwrap_err();
        assert!(err.contains("no place"), "{err}");
    }
}
