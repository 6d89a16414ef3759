//! The shape rules (see `shape/`).
pub(crate) fn problems(_root: &std::path::Path) -> Vec<String> {
    Vec::new()
}
