//! The first call's answer, `/call show all J`, read controller by controller before the detail
//! calls add to it:
//!
//! * entries naming a controller are the controllers; one whose answer said `Failure` is
//!   reported with storcli's words, its VD and drive lists used when it still printed them and
//!   its last good answer kept when it did not;
//! * an entry naming no controller (an answer such as `{"Controllers":[{}]}`) is
//!   an error, never a controller that silently vanishes: the controllers of the last good round
//!   it does not name keep their last state; an answer of nothing else fails the round;
//! * storcli's and perccli's `No Controller found` is a state when no controller ever answered
//!   (storcli installed on a node without one), an error when some did (they, or their driver,
//!   are gone).

use std::collections::BTreeMap;

use crate::sources::storcli::Controller;

/// What the first call's answer says.
#[derive(Debug)]
pub(super) enum First {
    /// storcli found no controller, and none answered before: its words.
    NoController(String),
    /// The controllers.
    Controllers {
        /// Every controller named, and those of the last round an unnamed entry may be.
        ctls: Vec<Controller>,
        /// `c0` → what went wrong with its answer (`Failure`, a row not read).
        failed: BTreeMap<String, Vec<String>>,
        /// Entries naming no controller, besides named ones: the message to report.
        unnamed: Option<String>,
    },
}

/// Reads `answer`, the call `label`'s, against the last good round's controllers `last`;
/// `Err` is the message of an answer that gives nothing to use.
pub(super) fn first(
    answer: Vec<Controller>,
    last: &[Controller],
    label: &str,
) -> Result<First, String> {
    let (mut ctls, unnamed): (Vec<Controller>, Vec<Controller>) =
        answer.into_iter().partition(|c| c.controller.is_some());
    if ctls.is_empty() {
        let Some(none) = unnamed.iter().find(|c| c.status.no_controller()) else {
            return Err(format!(
                "no controller named in the answer ({})",
                unnamed_note(&unnamed)
            ));
        };
        let msg = none.status.message();
        if last.is_empty() {
            return Ok(First::NoController(msg));
        }
        let had: Vec<String> = last
            .iter()
            .filter_map(|c| Some(format!("c{}", c.controller?)))
            .collect();
        return Err(format!("{msg}, though {} answered before", had.join(", ")));
    }
    let unnamed = (!unnamed.is_empty()).then(|| {
        // An entry naming no controller may be one of those that answered before: they keep
        // their last good state rather than vanish.
        for old in last {
            if !ctls.iter().any(|c| c.controller == old.controller) {
                ctls.push(old.clone());
            }
        }
        format!(
            "{} answer(s) naming no controller ({}); the controllers they may be keep their last state",
            unnamed.len(),
            unnamed_note(&unnamed)
        )
    });
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &mut ctls {
        let Some(n) = c.controller else { continue };
        for u in &c.unreadable {
            failed
                .entry(format!("c{n}"))
                .or_default()
                .push(format!("storcli {label}: {u}"));
        }
        if c.status.ok {
            continue;
        }
        failed
            .entry(format!("c{n}"))
            .or_default()
            .push(format!("storcli {label}: {}", c.status.message()));
        // Nothing in it: the last good answer of that controller stands.
        if c.virtual_drives.is_empty() && c.physical_drives.is_empty() {
            if let Some(old) = last.iter().find(|o| o.controller == Some(n)) {
                *c = old.clone();
            }
        }
    }
    Ok(First::Controllers {
        ctls,
        failed,
        unnamed,
    })
}

/// What the entries naming no controller said, for the error message.
fn unnamed_note(unnamed: &[Controller]) -> String {
    let said: Vec<String> = unnamed
        .iter()
        .map(|c| {
            if c.status == Default::default() {
                "an empty entry {}".to_owned()
            } else {
                c.status.message()
            }
        })
        .collect();
    said.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::storcli::parse;

    fn corpus(name: &str) -> Vec<Controller> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/storcli")
            .join(name);
        parse(&std::fs::read_to_string(p).expect("fixture")).expect("parses")
    }

    const LABEL: &str = "/call show all J";

    #[test]
    fn no_controller_found_after_controllers_answered_is_an_error() {
        let none = corpus("canonical-perccli-call-show-no-controller-found.json");
        assert!(matches!(
            first(none.clone(), &[], LABEL),
            Ok(First::NoController(m)) if m == "No Controller found"
        ));
        let last = corpus("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
        assert_eq!(
            first(none, &last, LABEL).expect_err("an error"),
            "No Controller found, though c0 answered before"
        );
    }

    #[test]
    fn an_unnamed_entry_beside_named_ones_keeps_the_others_last_state() {
        // c0 and c1 answered; now c0 and an empty entry
        let last = corpus(
            "mirantis-nytrocli-call-show-all-nytro-megaraid-and-warpdrive-dg-vd-number.json",
        );
        let mut now = vec![last[0].clone()];
        now.extend(corpus("synthetic-call-show-all-one-empty-entry.json"));
        let Ok(First::Controllers {
            ctls,
            failed,
            unnamed,
        }) = first(now, &last, LABEL)
        else {
            panic!("controllers");
        };
        assert_eq!(ctls, last, "c1 kept");
        assert!(failed.is_empty());
        assert_eq!(
            unnamed.as_deref(),
            Some("1 answer(s) naming no controller (an empty entry {}); the controllers they may be keep their last state")
        );
    }
}
