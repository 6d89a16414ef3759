//! The kernel's view of the maps through the `DM_TABLE_STATUS` ioctl: each map's status (fail
//! counts, `A`/`F`, the active group) every sample and its table (`queue_if_no_path`) when the
//! path set changes and once a minute. Used when the agent runs on the real `/sys` and may open
//! `/dev/mapper/control`; otherwise the commands (`commands.rs`) give the same [`DmView`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::topology::SysMap;
use crate::sources::dmmultipath::{self, ioctl::DmControl, DevT, MultipathStatus, MultipathTable};
use crate::sources::{ParseError, SourceError};

/// The kernel's view of the maps from one `dmsetup` round.
pub(super) type DmView = BTreeMap<String, (MultipathStatus, Option<MultipathTable>)>;

/// Reads the maps through an open device-mapper control device.
pub(super) struct IoctlReader {
    ctl: DmControl,
    /// The control device's path, for errors.
    path: PathBuf,
    /// Each map's table and when it was read (monotonic seconds).
    tables: BTreeMap<String, (MultipathTable, f64)>,
}

impl IoctlReader {
    /// A reader on `ctl`, opened from `path`.
    pub(super) fn new(ctl: DmControl, path: PathBuf) -> Self {
        Self {
            ctl,
            path,
            tables: BTreeMap::new(),
        }
    }

    /// Status and table of every map in `maps`.
    pub(super) fn read(&mut self, maps: &[SysMap], now_s: f64) -> Result<DmView, SourceError> {
        let ctl = &mut self.ctl;
        let mut view = DmView::new();
        for m in maps {
            let Some(dev) = m.dev else { continue };
            let status = match ctl.status(dev, false) {
                Ok(t) => t,
                // The map went away between the sysfs scan and the ioctl.
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => continue,
                Err(e) => return Err(SourceError::io(&self.path, e)),
            };
            let Some(st) = status.iter().find(|t| t.target == "multipath") else {
                continue;
            };
            let status = match dmmultipath::parse_status_args(&st.args) {
                Ok(s) => s,
                Err(e) => {
                    let line = format!("{} {} multipath {}", st.start, st.length, st.args);
                    return Err(SourceError::parse(&self.path, ParseError::new(1, &line, e)));
                }
            };
            // The table changes only on a reload: re-read it when the path set differs, and
            // once a minute.
            let devs = |s: &MultipathStatus| -> Vec<DevT> {
                s.groups
                    .iter()
                    .flat_map(|g| g.paths.iter().map(|p| p.dev))
                    .collect()
            };
            let stale = match self.tables.get(&m.name) {
                Some((t, at)) => {
                    now_s - at > 60.0
                        || t.groups
                            .iter()
                            .flat_map(|g| g.paths.iter().map(|p| p.dev))
                            .collect::<Vec<_>>()
                            != devs(&status)
                }
                None => true,
            };
            if stale {
                if let Ok(t) = ctl.status(dev, true) {
                    if let Some(tt) = t.iter().find(|t| t.target == "multipath") {
                        if let Ok(table) = dmmultipath::parse_table_args(&tt.args) {
                            self.tables.insert(m.name.clone(), (table, now_s));
                        }
                    }
                }
            }
            let table = self.tables.get(&m.name).map(|(t, _)| t.clone());
            view.insert(m.name.clone(), (status, table));
        }
        self.tables.retain(|k, _| view.contains_key(k));
        Ok(view)
    }
}
