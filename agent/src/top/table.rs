//! Tables that fit a width, the way htop drops meters: every column has a priority, and when the
//! screen is too narrow the least important go first, whole groups at a time (`r_await` never
//! stays without `w_await`). The first column names the row and is always shown; a name longer
//! than its column ends in `…`, never cut silently. An optional last column (flags, notes)
//! takes what width is left.
//!
//! Widths are counted in `char`s: what is drawn here is ASCII but for `…`, `—` and `≥`, which
//! terminals draw one cell wide.

use std::fmt::Write;

/// How a column's values stand in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Right,
}

/// One column that may be dropped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Column {
    /// Header.
    pub(super) head: &'static str,
    /// Width of its values (and of the header, which must not be longer).
    pub(super) width: usize,
    /// 0: kept whenever the row's name fits; higher numbers are dropped first, together.
    pub(super) prio: u8,
    /// Alignment of values and header.
    pub(super) align: Align,
}

/// Shorthand for a right-aligned column.
pub(super) const fn num(head: &'static str, width: usize, prio: u8) -> Column {
    Column {
        head,
        width,
        prio,
        align: Align::Right,
    }
}

/// Shorthand for a left-aligned column.
pub(super) const fn text(head: &'static str, width: usize, prio: u8) -> Column {
    Column {
        head,
        width,
        prio,
        align: Align::Left,
    }
}

/// One value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    /// Text, highlighted (reverse video on a terminal) when the flag is set. Longer than its
    /// column: ends in `…`.
    Text(String, bool),
    /// A number with this many decimals, or fewer (then k/M/G/T) when it does not fit.
    Num(f64, usize),
    /// Unknown: `-`.
    None,
}

impl Cell {
    pub(super) fn opt(v: Option<f64>, decimals: usize) -> Self {
        v.map_or(Cell::None, |v| Cell::Num(v, decimals))
    }

    pub(super) fn text(s: impl Into<String>) -> Self {
        Cell::Text(s.into(), false)
    }
}

/// One row: its name, a cell per column, and the last column's words (each a flag that may be
/// highlighted).
#[derive(Debug, Clone, Default)]
pub(super) struct Row {
    pub(super) key: String,
    pub(super) cells: Vec<Cell>,
    pub(super) tail: Vec<(String, bool)>,
}

/// The last column.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tail {
    /// Header.
    pub(super) head: &'static str,
    /// Width set aside for it before any other column is placed (`usize::MAX`: all it needs);
    /// 0 lets it live on what the other columns leave.
    pub(super) reserve: usize,
    /// Between two of its words.
    pub(super) sep: &'static str,
}

/// A table to draw.
#[derive(Debug, Clone)]
pub(super) struct Table {
    /// Header of the name column.
    pub(super) key_head: &'static str,
    /// Widest the name column gets before the other columns are placed (it grows back into
    /// space they leave).
    pub(super) key_max: usize,
    pub(super) cols: Vec<Column>,
    pub(super) tail: Option<Tail>,
    pub(super) rows: Vec<Row>,
}

/// Narrowest a name column gets.
const KEY_MIN: usize = 6;
/// Narrowest the last column is shown at when nothing was set aside for it.
const TAIL_MIN: usize = 8;
/// Columns between the last fixed column and the last one.
const TAIL_GAP: usize = 2;

pub(super) fn width_of(s: &str) -> usize {
    s.chars().count()
}

/// `s` in at most `w` columns: as is, or cut with `…` as its last character.
pub(super) fn ellipsize(s: &str, w: usize) -> String {
    if width_of(s) <= w {
        return s.to_owned();
    }
    if w == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(w - 1).collect();
    t.push('…');
    t
}

/// `v` in at most `w` columns, with `decimals` if they fit, fewer if not, then scaled by
/// k/M/G/T (powers of 1000); `-` for NaN and infinities, `#`s when nothing fits.
pub(super) fn fit_num(v: f64, decimals: usize, w: usize) -> String {
    if !v.is_finite() {
        return "-".to_owned();
    }
    for d in (0..=decimals).rev() {
        let s = format!("{v:.d$}");
        if width_of(&s) <= w {
            return s;
        }
    }
    for (div, unit) in [(1e3, 'k'), (1e6, 'M'), (1e9, 'G'), (1e12, 'T')] {
        for d in [1usize, 0] {
            let s = format!("{:.d$}{unit}", v / div);
            if width_of(&s) <= w {
                return s;
            }
        }
    }
    "#".repeat(w)
}

/// Which columns are shown and how wide the name and last columns are.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Layout {
    pub(super) key: usize,
    pub(super) shown: Vec<bool>,
    /// Width of the last column, when shown.
    pub(super) tail: Option<usize>,
}

impl Table {
    fn key_natural(&self) -> usize {
        self.rows
            .iter()
            .map(|r| width_of(&r.key))
            .chain([width_of(self.key_head)])
            .max()
            .unwrap_or(0)
    }

    fn tail_natural(&self) -> usize {
        let Some(t) = self.tail else { return 0 };
        self.rows
            .iter()
            .map(|r| tail_text(&r.tail, t.sep).chars().count())
            .chain([width_of(t.head)])
            .max()
            .unwrap_or(0)
    }

    /// Places the columns in `width`: the name column first, the last column's reserve, then
    /// the other columns by priority, a whole priority at a time, until one does not fit; then
    /// the name column grows back to its natural width and the last column takes the rest.
    pub(super) fn layout(&self, width: usize) -> Layout {
        let key_natural = self.key_natural();
        // Never wider than the screen, even on one too narrow for anything else.
        let mut key = key_natural.min(self.key_max.max(KEY_MIN)).min(width);
        let tail_natural = self.tail_natural();
        let any_tail = self.rows.iter().any(|r| !r.tail.is_empty());
        let reserve = match self.tail {
            Some(t) if any_tail => t.reserve.min(tail_natural),
            _ => 0,
        };
        let reserved = if reserve > 0 { reserve + TAIL_GAP } else { 0 };
        let mut left = width.saturating_sub(key + reserved);
        let mut shown = vec![false; self.cols.len()];
        let mut prios: Vec<u8> = self.cols.iter().map(|c| c.prio).collect();
        prios.sort_unstable();
        prios.dedup();
        for p in prios {
            let need: usize = self
                .cols
                .iter()
                .filter(|c| c.prio == p)
                .map(|c| c.width + 1)
                .sum();
            if need > left && p == 0 {
                // The columns that must stay take room from a long name column first.
                let spare = key.saturating_sub(KEY_MIN.min(key));
                let take = (need - left).min(spare);
                key -= take;
                left += take;
            }
            if need > left {
                break;
            }
            left -= need;
            for (i, c) in self.cols.iter().enumerate() {
                if c.prio == p {
                    shown[i] = true;
                }
            }
        }
        key += key_natural.saturating_sub(key).min(left);
        let used = key
            + self
                .cols
                .iter()
                .zip(&shown)
                .filter(|(_, s)| **s)
                .map(|(c, _)| c.width + 1)
                .sum::<usize>();
        let tail = match self.tail {
            Some(_) if any_tail => {
                let w = width.saturating_sub(used + TAIL_GAP);
                let least = if reserve > 0 {
                    1
                } else {
                    TAIL_MIN.min(tail_natural)
                };
                (w >= least).then(|| w.min(tail_natural))
            }
            _ => None,
        };
        Layout { key, shown, tail }
    }

    /// Appends the header and the rows, each line at most `width` columns (but for a name
    /// column that could not shrink further), without trailing spaces.
    pub(super) fn draw(&self, out: &mut String, width: usize, color: bool) {
        let l = self.layout(width);
        let mut line = String::new();
        let push = |line: &mut String, s: &str, hl: bool| {
            if hl && color {
                let _ = write!(line, "\x1b[7m{s}\x1b[0m");
            } else {
                line.push_str(s);
            }
        };
        // header
        push(
            &mut line,
            &pad(&ellipsize(self.key_head, l.key), l.key, Align::Left),
            false,
        );
        for (c, _) in self.cols.iter().zip(&l.shown).filter(|(_, s)| **s) {
            push(&mut line, " ", false);
            push(&mut line, &pad(c.head, c.width, c.align), false);
        }
        if let (Some(t), Some(w)) = (self.tail, l.tail) {
            push(&mut line, "  ", false);
            push(&mut line, &ellipsize(t.head, w), false);
        }
        finish(out, &mut line);
        for r in &self.rows {
            push(
                &mut line,
                &pad(&ellipsize(&r.key, l.key), l.key, Align::Left),
                false,
            );
            for ((c, cell), _) in self
                .cols
                .iter()
                .zip(&r.cells)
                .zip(&l.shown)
                .filter(|(_, s)| **s)
            {
                push(&mut line, " ", false);
                let (s, hl) = match cell {
                    Cell::Text(s, hl) => (ellipsize(s, c.width), *hl),
                    Cell::Num(v, d) => (fit_num(*v, *d, c.width), false),
                    Cell::None => ("-".to_owned(), false),
                };
                // Highlight the value, not its padding.
                let gap = c.width.saturating_sub(width_of(&s));
                if c.align == Align::Right {
                    push(&mut line, &" ".repeat(gap), false);
                }
                push(&mut line, &s, hl);
                if c.align == Align::Left {
                    push(&mut line, &" ".repeat(gap), false);
                }
            }
            if let (Some(t), Some(w)) = (self.tail, l.tail) {
                if !r.tail.is_empty() {
                    push(&mut line, "  ", false);
                    let all = tail_text(&r.tail, t.sep);
                    if width_of(&all) <= w {
                        for (i, (word, hl)) in r.tail.iter().enumerate() {
                            if i > 0 {
                                push(&mut line, t.sep, false);
                            }
                            push(&mut line, word, *hl);
                        }
                    } else {
                        push(&mut line, &ellipsize(&all, w), false);
                    }
                }
            }
            finish(out, &mut line);
        }
    }
}

fn tail_text(words: &[(String, bool)], sep: &str) -> String {
    let v: Vec<&str> = words.iter().map(|(w, _)| w.as_str()).collect();
    v.join(sep)
}

fn pad(s: &str, w: usize, align: Align) -> String {
    let gap = w.saturating_sub(width_of(s));
    match align {
        Align::Left => format!("{s}{}", " ".repeat(gap)),
        Align::Right => format!("{}{s}", " ".repeat(gap)),
    }
}

fn finish(out: &mut String, line: &mut String) {
    out.push_str(line.trim_end_matches(' '));
    out.push('\n');
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(keys: &[&str]) -> Table {
        Table {
            key_head: "Device",
            key_max: 10,
            cols: vec![num("%util", 6, 1), num("r/s", 7, 2), num("w/s", 7, 2)],
            tail: Some(Tail {
                head: "flag",
                reserve: 3,
                sep: " ",
            }),
            rows: keys
                .iter()
                .map(|k| Row {
                    key: (*k).to_owned(),
                    cells: vec![Cell::Num(99.5, 2), Cell::Num(1.0, 2), Cell::None],
                    tail: vec![("SAT".into(), true)],
                })
                .collect(),
        }
    }

    #[test]
    fn numbers_lose_decimals_then_scale() {
        assert_eq!(fit_num(12.345, 2, 8), "12.35");
        assert_eq!(fit_num(1_171_875.0, 2, 9), "1171875.0");
        assert_eq!(fit_num(1_171_875.0, 2, 6), "1172k");
        assert_eq!(fit_num(1_171_875.0, 2, 4), "1.2M");
        assert_eq!(fit_num(f64::NAN, 2, 6), "-");
        assert_eq!(fit_num(1e30, 2, 3), "###");
    }

    #[test]
    fn columns_drop_by_priority_a_group_at_a_time() {
        let t = table(&["sda"]);
        // all: 6 + 7 + 8 + 8 + 2 + 3 = 34
        assert_eq!(t.layout(34).shown, vec![true, true, true]);
        // r/s and w/s go together
        assert_eq!(t.layout(33).shown, vec![true, false, false]);
        let mut s = String::new();
        t.draw(&mut s, 20, false);
        assert_eq!(s, "Device  %util  flag\nsda     99.50  SAT\n");
    }

    #[test]
    fn long_names_end_in_an_ellipsis_and_grow_back_when_there_is_room() {
        let t = table(&["3600a0b800026b282 (dm-3)"]);
        let mut s = String::new();
        t.draw(&mut s, 24, false);
        assert!(s.contains("\n3600a0b8000…  99.50  SAT\n"), "{s}");
        let mut s = String::new();
        t.draw(&mut s, 200, false);
        assert!(s.contains("3600a0b800026b282 (dm-3)  99.50"), "{s}");
    }

    #[test]
    fn no_line_is_wider_than_asked_down_to_the_name_column() {
        let t = table(&["mpatha (dm-0)", "sda"]);
        for w in 15..120 {
            let mut s = String::new();
            t.draw(&mut s, w, false);
            for l in s.lines() {
                assert!(width_of(l) <= w, "{w}: {l:?}");
            }
        }
    }

    proptest::proptest! {
        /// Whatever the names, numbers and width, no line is wider than the screen and
        /// nothing panics.
        #[test]
        fn nothing_is_wider_than_the_screen(
            keys in proptest::collection::vec("[a-z0-9 ()…-]{0,40}", 0..5),
            values in proptest::collection::vec(proptest::num::f64::ANY, 3),
            tail in "[A-Z ]{0,30}",
            width in 1usize..250,
        ) {
            let mut t = table(&[]);
            t.rows = keys
                .iter()
                .map(|k| Row {
                    key: k.clone(),
                    cells: values.iter().map(|v| Cell::Num(*v, 2)).collect(),
                    tail: vec![(tail.clone(), false)],
                })
                .collect();
            let mut s = String::new();
            t.draw(&mut s, width, false);
            for l in s.lines() {
                proptest::prop_assert!(width_of(l) <= width, "{}: {:?}", width, l);
            }
        }
    }

    #[test]
    fn highlight_wraps_the_value_only() {
        let t = table(&["sda"]);
        let mut s = String::new();
        t.draw(&mut s, 20, true);
        assert!(s.ends_with("99.50  \x1b[7mSAT\x1b[0m\n"), "{s:?}");
    }
}
