//! What the `md` and `md_member` lines say about an array and its members.

/// The health of an array as the `md` measurement reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayState {
    /// Every slot holds a working in-sync member.
    Clean,
    /// At least one slot is down and nothing is rebuilding it.
    Degraded,
    /// At least one slot is down and a recovery is rebuilding it.
    Recovering,
    /// More members lost than the level can absorb, or the kernel says `broken`.
    Failed,
    /// Assembled but not running (or an external-metadata container).
    Inactive,
}

impl ArrayState {
    /// The `state` field value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Degraded => "degraded",
            Self::Recovering => "recovering",
            Self::Failed => "failed",
            Self::Inactive => "inactive",
        }
    }
}

/// One array, as last polled.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayStatus {
    /// `md127`.
    pub array: String,
    /// Personality (`raid6`); empty for an inactive array without one.
    pub level: String,
    /// Slots in the array (`raid_disks`); for raid0/linear and inactive arrays, members listed.
    pub members: u32,
    /// Slots holding a working member: `members − degraded` (0 for an inactive array).
    pub active: u32,
    /// Members marked faulty.
    pub failed: u32,
    /// Hot spares (members without a slot; every member of an inactive array).
    pub spare: u32,
    /// Slots without a working in-sync member.
    pub degraded: u32,
    /// Health.
    pub state: ArrayState,
    /// `idle`, `resync`, `recover`, `check`, `repair`, `reshape`, `frozen`, or `delayed`,
    /// `pending`, `remote` for a sync that is due but waits.
    pub sync_action: String,
    /// Progress of the running operation, percent.
    pub sync_pct: Option<f64>,
    /// The kernel's sync speed, KiB/s.
    pub sync_speed_kbps: Option<u64>,
    /// Our estimate of seconds left.
    pub sync_eta_s: Option<f64>,
    /// Sectors found inconsistent by the last check or repair (sysfs only).
    pub mismatch_cnt: Option<u64>,
    /// Member failures the array can still absorb; `None` when the level is unknown or the
    /// array is inactive.
    pub redundancy_left: Option<u32>,
    /// Probability of losing data before redundancy is restored; `None` when inactive.
    pub rebuild_risk: Option<f64>,
    /// The running operation has not moved for `stall_polls` polls.
    pub stalled: bool,
}

/// One member, as last polled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    /// Kernel device name.
    pub name: String,
    /// The kernel's sysfs state words joined by `,` (`in_sync,write_mostly`, `faulty`,
    /// `spare`, `journal`, `blocked`, `write_error`, …), except that a member being rebuilt into
    /// a slot reads `rebuilding` where sysfs says `spare`. Without sysfs, the words are derived
    /// from mdstat's flags, and a member without flags reads `in_sync`, or `active` while the
    /// array recovers (mdstat does not say which member is being rebuilt).
    pub state: String,
    /// Marked faulty.
    pub failed: bool,
    /// A hot spare without a slot.
    pub spare: bool,
    /// Read errors corrected on this member (sysfs only).
    pub errors: Option<u64>,
}

impl MemberStatus {
    /// The member's role, for transitions.
    pub(crate) fn role(&self) -> &'static str {
        let has = |w: &str| self.state.split(',').any(|s| s == w);
        if self.failed {
            "failed"
        } else if has("journal") {
            "journal"
        } else if self.spare {
            "spare"
        } else if has("rebuilding") {
            "rebuilding"
        } else if has("replacement") {
            "replacement"
        } else {
            "active"
        }
    }
}
