//! `agent/link/hot-text.ld` (made by `bench/hot-text.sh`, read by the linker through
//! `agent/build.rs`) in the form the script writes: the generator's header, one input-section
//! pattern a line, and the `INSERT` that keeps the rest of the linker's layout. A hand edit that
//! the linker would refuse fails here, not in a release build.

use std::path::Path;

const PATH: &str = "agent/link/hot-text.ld";

pub(crate) fn problems(root: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(root.join(PATH)) else {
        return Vec::new(); // no list: the release build links in the linker's own order
    };
    form_problems(&text)
}

fn form_problems(text: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    if !text.starts_with("/* Made by bench/hot-text.sh") {
        errs.push(format!(
            "{PATH}: not made by bench/hot-text.sh (run it again)"
        ));
    }
    let Some(open) = lines.iter().position(|l| *l == "  .text.storwatch_hot :") else {
        errs.push(format!("{PATH}: no `.text.storwatch_hot` section"));
        return errs;
    };
    let tail = ["  }", "}", "INSERT BEFORE .text;"];
    if lines.len() < open + 2 + tail.len()
        || lines.get(open + 1) != Some(&"  {")
        || lines[lines.len() - tail.len()..] != tail
    {
        errs.push(format!(
            "{PATH}: not the generator's layout (`{{` after the section, `INSERT BEFORE .text;` last)"
        ));
        return errs;
    }
    let mut patterns = 0;
    for (i, l) in lines[open + 2..lines.len() - tail.len()].iter().enumerate() {
        let ok = l
            .strip_prefix("    *(.text.")
            .and_then(|p| p.strip_suffix(')'))
            .and_then(|p| p.split_once(" .text.unlikely."))
            .is_some_and(|(name, cold)| name == cold && is_symbol(name));
        if !ok {
            errs.push(format!(
                "{PATH}: line {}: not `    *(.text.<symbol> .text.unlikely.<symbol>)`: {l:?}",
                open + 3 + i
            ));
        }
        patterns += 1;
    }
    if patterns == 0 {
        errs.push(format!("{PATH}: lists no function"));
    }
    errs
}

/// A symbol's name as the generator writes it: its bytes, `*` for a ThinLTO suffix and for the
/// hash of a name (`17h*E`).
fn is_symbol(name: &str) -> bool {
    name.bytes().any(|b| b != b'*')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_$.*".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::form_problems;

    const GOOD: &str = "/* Made by bench/hot-text.sh: … */\nSECTIONS\n{\n  .text.storwatch_hot :\n  {\n    *(.text._ZN3std2io5stdio6_print17h0123456789abcdefE .text.unlikely._ZN3std2io5stdio6_print17h0123456789abcdefE)\n    *(.text._RNvCs1_4core3fmt* .text.unlikely._RNvCs1_4core3fmt*)\n    *(.text._ZN15storwatch_agent4root4fill17h*E .text.unlikely._ZN15storwatch_agent4root4fill17h*E)\n  }\n}\nINSERT BEFORE .text;\n";

    #[test]
    fn the_generators_form_passes() {
        assert_eq!(form_problems(GOOD), Vec::<String>::new());
    }

    #[test]
    fn edits_the_linker_would_refuse_fail() {
        for bad in [
            GOOD.replace("/* Made by bench/hot-text.sh", "/* edited"),
            GOOD.replace("*(.text._RNvCs1_4core3fmt* .text.unlikely._RNvCs1_4core3fmt*)", "*(.text._RNv core)"),
            GOOD.replace(" .text.unlikely._RNvCs1_4core3fmt*)", " .text.unlikely._RNvCs1_4core3fm*)"),
            GOOD.replace("INSERT BEFORE .text;\n", ""),
            // every function of the program
            GOOD.replace("_RNvCs1_4core3fmt*", "*"),
            GOOD.replace("    *(.text._ZN3std2io5stdio6_print17h0123456789abcdefE .text.unlikely._ZN3std2io5stdio6_print17h0123456789abcdefE)\n    *(.text._RNvCs1_4core3fmt* .text.unlikely._RNvCs1_4core3fmt*)\n    *(.text._ZN15storwatch_agent4root4fill17h*E .text.unlikely._ZN15storwatch_agent4root4fill17h*E)\n", ""),
            GOOD.replace("  .text.storwatch_hot :\n", ""),
        ] {
            assert!(!form_problems(&bad).is_empty(), "passed: {bad}");
        }
    }
}
