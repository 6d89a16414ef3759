//! The small JSON writer of the tools' documents: objects keep their key order, and the layout
//! is smartctl's (two spaces, `"key": value`) or storcli's (tabs, `"key" : value`).

use std::fmt::Write as _;

/// A JSON value whose objects keep their key order (as the tools print them).
#[derive(Debug, Clone)]
pub enum J {
    S(String),
    U(u64),
    I(i64),
    /// A number printed as given (`"gigabytes_processed"` is a string; this is for floats).
    F(f64),
    B(bool),
    A(Vec<J>),
    O(Vec<(String, J)>),
}

/// Builds an object from `(key, value)` pairs.
pub fn obj<const N: usize>(kv: [(&str, J); N]) -> J {
    J::O(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A string value.
pub fn s(v: impl Into<String>) -> J {
    J::S(v.into())
}

/// How a tool lays out its JSON.
#[derive(Clone, Copy)]
pub enum Style {
    /// smartctl: two spaces per level, `"key": value`.
    Smartctl,
    /// storcli: a tab per level, `"key" : value`.
    Storcli,
}

impl J {
    /// The document as the tool prints it, with a final newline.
    pub fn render(&self, style: Style) -> String {
        let mut out = String::new();
        self.write(&mut out, 0, style);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, level: usize, style: Style) {
        let pad = |out: &mut String, n: usize| match style {
            Style::Smartctl => out.push_str(&"  ".repeat(n)),
            Style::Storcli => out.push_str(&"\t".repeat(n)),
        };
        match self {
            J::S(v) => out.push_str(&serde_json::Value::from(v.as_str()).to_string()),
            J::U(v) => {
                let _ = write!(out, "{v}");
            }
            J::I(v) => {
                let _ = write!(out, "{v}");
            }
            J::F(v) => out.push_str(&serde_json::Value::from(*v).to_string()),
            J::B(v) => out.push_str(if *v { "true" } else { "false" }),
            J::A(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push_str("[\n");
                for (i, it) in items.iter().enumerate() {
                    pad(out, level + 1);
                    it.write(out, level + 1, style);
                    if i + 1 < items.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                pad(out, level);
                out.push(']');
            }
            J::O(kv) => {
                if kv.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push_str("{\n");
                for (i, (k, v)) in kv.iter().enumerate() {
                    pad(out, level + 1);
                    out.push_str(&serde_json::Value::from(k.as_str()).to_string());
                    out.push_str(match style {
                        Style::Smartctl => ": ",
                        Style::Storcli => " : ",
                    });
                    v.write(out, level + 1, style);
                    if i + 1 < kv.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                pad(out, level);
                out.push('}');
            }
        }
    }
}
