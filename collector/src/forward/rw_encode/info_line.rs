//! A plain line's string fields: the labels of its measurement's `_info` series (value 1),
//! beside its numbers' series, as [`prom_line`] names them. An agent's report carries strings on
//! most of its lines (a device's state, a scheduler's name, a NIC's operational state: 406 of
//! ~700 lines at 200 disks), and they change seldom, so the `_info` series' label set and
//! metric are cached by the line's series key and strings as written (the encoder's
//! `info_key`, filled by [`super::plain_line`] as it reads them): [`prom_line`] makes them
//! from the line read whole the first time, and a line of the same series and strings takes
//! them with one lookup (read in one pass, or by its layout: [`super::known_line`]). A line that writes a string's key twice (as strings, or a string and a
//! number) is left to [`prom_line`] whole: it keeps a key's last value whatever its type.

use storwatch_wire::lp::{FieldType, LineView, Point};
use storwatch_wire::prom::prom_line;

use super::plain_line::NONE;
use super::{clean, Encoder};

impl Encoder {
    /// Whether each string field's key is the only field of the line with that key:
    /// [`prom_line`] keeps a key written twice by its last value whatever its type, which the
    /// line's numbers and `_info` labels read apart would not.
    pub(super) fn strings_once(&mut self, line: &str, v: &LineView<'_>) -> bool {
        let keys = &mut self.line_keys;
        keys.clear();
        let base = line.as_ptr() as usize;
        for f in v.fields() {
            let k = f.key_raw();
            let at = (k.as_ptr() as usize).wrapping_sub(base);
            keys.push((at, at + k.len(), f.field_type() == FieldType::String));
        }
        let key = |&(a, b, _): &(usize, usize, bool)| line.get(a..b);
        keys.iter().enumerate().all(|(i, s)| {
            !s.2 || keys
                .iter()
                .enumerate()
                .all(|(j, o)| i == j || key(o) != key(s))
        })
    }

    /// The `_info` series of a plain line with string fields, new to the cache (its label set
    /// and metric; [`NONE`] when it has none, each string's label being a tag's), made by
    /// [`prom_line`] from the line read `whole`, as every such line was, and kept by its series
    /// key and strings as written (`info_key`, filled by the line's reading).
    pub(super) fn new_info_series(&mut self, whole: &Point<'_>) -> (u32, u32) {
        let l = prom_line(whole);
        let info = if l.info.is_empty() {
            (NONE, NONE)
        } else {
            let mut labels = l.labels.clone();
            labels.extend(l.info.iter().cloned());
            let labels = clean(labels);
            let id = self.label_set(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            (id, self.metric_id(&l.info_metric()))
        };
        self.info_ids.insert(self.info_key.as_slice().into(), info);
        info
    }
}
