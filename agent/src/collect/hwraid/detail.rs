//! Calls 2–4 of a round add detail to what `show all` gave: each VD's members and properties
//! (`/call/vall show all J`), each drive's counters, serial and WWN (`/call/eall/sall show all
//! J`), rebuild progress (`/call/eall/sall show rebuild J`). storcli answers each of them per
//! controller, each answer with its own `Status`, so each controller's detail is taken on its
//! own:
//!
//! * its answer said `Success`: its detail is this round's;
//! * the call failed as a whole (hung, garbage), or the controller's answer said `Failure`, or
//!   the answer does not name it: its detail is the **last good round's** (rebuild progress
//!   excepted: an old percentage would read as a rebuild standing still), a drive keeps its
//!   counters and its serial — the serial is what ties it to its smartctl reading, to the
//!   `raid_vd` tag of the drive monitor and to the VD's rebuild risk — and the failure is
//!   reported against that controller (`read_ok=false`, `read_error`);
//! * unless the refusal is **harmless**: `show all` lists nothing this call could add for that
//!   controller — no VD for `/call/vall` (an HBA in IT or JBOD mode: storcli says
//!   `Un-supported command`), no drive in an enclosure for `/call/eall/sall` (drives cabled
//!   without one, or none: `No Enclosure found.`, `No drive found!`), no drive rebuilding for
//!   `show rebuild`. Such an answer is permanent, costs nothing, and is said once in the log
//!   (info), never counted as an error. Judged by what `show all` lists rather than by the
//!   words, which vary with storcli's version.

use crate::sources::storcli::{Controller, PdState, VdState};

/// The VDs' call is made at least every this many rounds (ten minutes at the default interval).
pub(super) const VDS_READ_EVERY: u32 = 10;

/// The drives' call is made at least every this many rounds (five minutes at the default
/// interval).
pub(super) const PDS_READ_EVERY: u32 = 5;

/// Which detail call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Detail {
    /// `/call/vall show all J`.
    Vds,
    /// `/call/eall/sall show all J`.
    Pds,
    /// `/call/eall/sall show rebuild J`.
    Rebuild,
}

impl Detail {
    /// The call's arguments.
    pub(super) fn args(self) -> &'static [&'static str] {
        match self {
            Self::Vds => &["/call/vall", "show", "all", "J"],
            Self::Pds => &["/call/eall/sall", "show", "all", "J"],
            Self::Rebuild => &["/call/eall/sall", "show", "rebuild", "J"],
        }
    }

    /// For a call that may be left out: where the worker keeps the rounds since it was made
    /// (an index), and at most how many rounds apart it is made while `show all`'s answer
    /// leaves its own as it was ([`Detail::stands`]); `None`: made every round.
    pub(super) fn read_every(self) -> Option<(usize, u32)> {
        match self {
            Self::Vds => Some((0, VDS_READ_EVERY)),
            Self::Pds => Some((1, PDS_READ_EVERY)),
            Self::Rebuild => None,
        }
    }

    /// Whether this round's `show all` (`ctls`) leaves the call's answer as the last round's
    /// (`last`) was, in what the monitor uses:
    ///
    /// * the VDs' call: every controller lists the same VD rows and drive rows, and no VD ran
    ///   an operation. A VD's members follow from its drives' `DG` column, its configured
    ///   write cache is set anew only with a change its `Cache` column shows, its NAA id does
    ///   not change; only an `OS Drive Name` changed by a rescan of the OS's SCSI bus can go
    ///   unseen until the call is made, and the NAA id ties the VD to its disk first;
    /// * the drives' call: the same lists, every VD optimal and every drive online, a spare,
    ///   unconfigured good or JBOD. A drive's counters and temperature do change then, but
    ///   slowly, and nothing is at risk; in any other state, they are read every round.
    pub(super) fn stands(self, ctls: &[Controller], last: &[Controller]) -> bool {
        let listed = ctls.len() == last.len()
            && ctls.iter().all(|c| {
                last.iter()
                    .find(|o| o.controller == c.controller)
                    .is_some_and(|o| same_listing(c, o))
            });
        match self {
            Self::Vds => listed,
            Self::Pds => listed && ctls.iter().all(steady),
            Self::Rebuild => false,
        }
    }

    /// Whether `show all` lists anything for this call to add on controller `c`.
    fn has_work(self, c: &Controller) -> bool {
        match self {
            Self::Vds => !c.virtual_drives.is_empty(),
            Self::Pds => c.physical_drives.iter().any(|d| d.slot.enclosure.is_some()),
            Self::Rebuild => c
                .physical_drives
                .iter()
                .any(|d| d.state == PdState::Rebuild),
        }
    }

    /// Copies this call's detail of one controller from `src` into `c`.
    fn copy(self, c: &mut Controller, src: &Controller) {
        match self {
            Self::Vds => copy_vds(c, src),
            Self::Pds => copy_pds(c, src),
            Self::Rebuild => c.rebuilds = src.rebuilds.clone(),
        }
    }
}

/// What one detail call said about each controller, besides its detail.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// `(c0, message)`: a controller's answer that failed, or that the answer left out.
    pub(super) faults: Vec<(String, String)>,
    /// `(c0, message)`: harmless refusals (see the module's comment).
    pub(super) notes: Vec<(String, String)>,
}

/// Merges call `kind`'s `answer` (`None`: the call failed as a whole, its error reported by the
/// caller) into `ctls`, controller by controller, the last good round's detail (`last`)
/// standing in where a controller's own answer gives none.
pub(super) fn merge(
    kind: Detail,
    ctls: &mut [Controller],
    answer: Option<&[Controller]>,
    last: &[Controller],
) -> Said {
    let args = kind.args().join(" ");
    let mut said = Said::default();
    for c in ctls.iter_mut() {
        let Some(n) = c.controller else { continue };
        let name = format!("c{n}");
        let own = answer.and_then(|a| a.iter().find(|x| x.controller == Some(n)));
        match own {
            Some(own) if own.status.ok => {
                kind.copy(c, own);
                for u in &own.unreadable {
                    said.faults
                        .push((name.clone(), format!("storcli {args}: {u}")));
                }
                continue;
            }
            Some(own) => {
                let msg = format!("storcli {args}: {}", own.status.message());
                if kind.has_work(c) {
                    said.faults.push((name, msg));
                } else {
                    said.notes.push((name, msg));
                }
            }
            // Said as a whole by the caller.
            None if answer.is_none() => {}
            None if kind.has_work(c) => said
                .faults
                .push((name, format!("storcli {args}: the answer names no c{n}"))),
            None => {}
        }
        // A rebuild's progress is judged only on what this round read: an old percentage
        // would read as a rebuild standing still.
        if kind == Detail::Rebuild {
            continue;
        }
        if let Some(old) = last.iter().find(|o| o.controller == Some(n)) {
            kind.copy(c, old);
        }
    }
    said
}

/// Every VD of `c` optimal, every drive in a state of a healthy controller.
fn steady(c: &Controller) -> bool {
    c.virtual_drives.iter().all(|v| v.state == VdState::Optimal)
        && c.physical_drives.iter().all(|d| {
            matches!(
                d.state,
                PdState::Online
                    | PdState::UnconfiguredGood
                    | PdState::GlobalHotSpare
                    | PdState::DedicatedHotSpare
                    | PdState::Jbod
            )
        })
}

/// The rows of `show all`'s `VD LIST` and `PD LIST` that `new` and `old` print are the same,
/// and no VD of `old` ran an operation.
fn same_listing(new: &Controller, old: &Controller) -> bool {
    let vds = new.virtual_drives.len() == old.virtual_drives.len()
        && new
            .virtual_drives
            .iter()
            .zip(&old.virtual_drives)
            .all(|(a, b)| {
                (a.dg, a.vd, &a.raid_level, &a.state, &a.access, &a.cache)
                    == (b.dg, b.vd, &b.raid_level, &b.state, &b.access, &b.cache)
                    && (&a.size, &a.name) == (&b.size, &b.name)
                    && b.active_operations.is_none()
            });
    let pds = new.physical_drives.len() == old.physical_drives.len()
        && new
            .physical_drives
            .iter()
            .zip(&old.physical_drives)
            .all(|(a, b)| {
                (a.slot, a.did, &a.state, a.dg, a.foreign, &a.size)
                    == (b.slot, b.did, &b.state, b.dg, b.foreign, &b.size)
                    && (&a.interface, &a.medium, &a.model) == (&b.interface, &b.medium, &b.model)
            });
    vds && pds
}

/// Each VD's members and properties (call 2).
fn copy_vds(c: &mut Controller, src: &Controller) {
    for v in &mut c.virtual_drives {
        let Some(s) = src.virtual_drives.iter().find(|s| s.vd == v.vd) else {
            continue;
        };
        if !s.members.is_empty() {
            v.members = s.members.clone();
        }
        v.os_drive_name = s.os_drive_name.clone().or(v.os_drive_name.take());
        v.naa_id = s.naa_id.clone().or(v.naa_id.take());
        v.write_cache_configured = s.write_cache_configured.or(v.write_cache_configured);
        v.active_operations = s.active_operations.clone().or(v.active_operations.take());
    }
}

/// Each drive's counters and identity (call 3).
fn copy_pds(c: &mut Controller, src: &Controller) {
    for d in &mut c.physical_drives {
        let Some(s) = src.drive(d.slot) else { continue };
        d.media_errors = s.media_errors.or(d.media_errors);
        d.other_errors = s.other_errors.or(d.other_errors);
        d.predictive_failures = s.predictive_failures.or(d.predictive_failures);
        d.smart_alert = s.smart_alert.or(d.smart_alert);
        d.serial = s.serial.clone().or(d.serial.take());
        d.wwn = s.wwn.clone().or(d.wwn.take());
        d.firmware = s.firmware.clone().or(d.firmware.take());
        d.temperature_c = s.temperature_c.or(d.temperature_c);
    }
}
