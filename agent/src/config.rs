//! The agent's configuration: `/etc/storwatch/agent.toml` by default, every value overridable by a
//! command-line flag. `storwatch-agent --print-default-config` prints [`DEFAULT_CONFIG`], which is
//! this file's documentation in TOML form (a test checks it parses to the defaults).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::duration;

/// The default configuration file.
pub const DEFAULT_PATH: &str = "/etc/storwatch/agent.toml";

/// The configuration, as read from TOML.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Value of the `host` tag; empty means the machine's hostname.
    pub host: String,
    /// Extra tags put on every line (`site`, `role`, `cluster`, …).
    pub tags: std::collections::BTreeMap<String, String>,
    /// Where `/proc` is (a fixture tree in tests).
    pub proc_root: PathBuf,
    /// Where `/sys` is.
    pub sys_root: PathBuf,
    /// How often counters are sampled.
    #[serde(with = "duration")]
    pub sample_interval: Duration,
    /// How often a report is emitted; a whole multiple of `sample_interval`.
    #[serde(with = "duration")]
    pub report_interval: Duration,
    /// %util at or above which a second counts as saturated (`saturated_s`).
    pub saturation_threshold_pct: f64,
    /// Where reports go: `-` (stdout), `file:PATH`, or an http(s):// write URL.
    pub output: String,
    /// How often the block tunables are reported even when unchanged. They are read every five
    /// minutes, or this often when it is shorter.
    #[serde(with = "duration")]
    pub tunables_interval: Duration,
    /// Block devices not reported (shell-style `*` globs on the kernel name).
    pub exclude_devices: Vec<String>,
    /// Network interfaces not reported (globs).
    pub exclude_interfaces: Vec<String>,
    /// Log level: error, warn, info, debug, trace.
    pub log_level: String,
    /// The rebuild-risk model.
    pub risk: crate::health::risk::RiskModel,
    /// Delivery to an http(s):// output: token, gzip, spool.
    pub http: crate::sink::http::HttpConfig,
    /// Size rotation of a `file:PATH` output: when the next report would take PATH past
    /// `max_file_bytes` it becomes `PATH.1` (`PATH.1` becomes `PATH.2`, …), and at most
    /// `keep_files` rotated files are kept, the oldest dropped.
    pub file: storwatch_wire::rotate::Rotation,
    /// MD RAID monitoring.
    pub md: crate::collect::md::MdConfig,
    /// ZFS pool monitoring.
    pub zpool: crate::collect::zpool::ZpoolConfig,
    /// dm-multipath monitoring.
    pub mpath: crate::collect::mpath::MpathConfig,
    /// Prometheus exposition of the latest reports (off unless `listen` is set).
    pub prometheus: crate::prometheus::PrometheusConfig,
    /// Filesystem capacity.
    pub fs: crate::collect::fs::FsConfig,
    /// Drive health (smartctl).
    pub drive: crate::collect::drive::DriveConfig,
    /// Hardware RAID controllers (storcli/perccli).
    pub hwraid: crate::collect::hwraid::HwraidConfig,
    /// Batch jobs' cgroups (per-job CPU efficiency and I/O stall).
    pub jobs: crate::collect::jobs::JobsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            host: String::new(),
            tags: Default::default(),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            sample_interval: Duration::from_secs(1),
            report_interval: Duration::from_secs(10),
            saturation_threshold_pct: 95.0,
            output: "-".into(),
            tunables_interval: Duration::from_secs(300),
            exclude_devices: ["loop*", "ram*", "zram*", "sr*", "fd*"]
                .map(String::from)
                .to_vec(),
            exclude_interfaces: vec![],
            log_level: "info".into(),
            risk: Default::default(),
            http: Default::default(),
            file: Default::default(),
            md: Default::default(),
            zpool: Default::default(),
            mpath: Default::default(),
            prometheus: Default::default(),
            fs: Default::default(),
            drive: Default::default(),
            hwraid: Default::default(),
            jobs: Default::default(),
        }
    }
}

/// The commented default configuration printed by `--print-default-config`.
pub const DEFAULT_CONFIG: &str = r#"# storwatch-agent configuration (/etc/storwatch/agent.toml).
# Every value here is the default; command-line flags override the file.

# Value of the host tag on every line; empty = this machine's hostname.
host = ""

# Where the kernel's trees are. Point them at a fixture or simulator tree to run anywhere.
proc_root = "/proc"
sys_root = "/sys"

# Counters are sampled every sample_interval; every report_interval one report per device and
# interface is emitted with the interval's rates plus the max, p95 and seconds-saturated of the
# per-sample values. report_interval must be a whole multiple of sample_interval.
sample_interval = "1s"
report_interval = "10s"

# %util at or above which a sample counts towards saturated_s.
saturation_threshold_pct = 95.0

# "-" (stdout), "file:/var/log/storwatch.lp" (append), or an InfluxDB-compatible write URL.
output = "-"

# Block tunables (read_ahead_kb, scheduler, nr_requests, max_sectors_kb) are reported when they
# change and at least this often. They are read every 5 minutes, or this often when shorter.
tunables_interval = "5m"

# Devices and interfaces left out of reports: shell-style globs on kernel names.
exclude_devices = ["loop*", "ram*", "zram*", "sr*", "fd*"]
exclude_interfaces = []

# error, warn, info, debug or trace (RUST_LOG overrides).
log_level = "info"

# Extra tags on every line.
[tags]
# site = "T2_XX_Example"
# role = "disk-server"
# cluster = "dcache-pool"

# Rebuild-risk model for MD arrays and zpools (see docs/metrics.md and docs/drive-risk.md).
[risk]
# Per-disk annual failure rate.
afr = 0.02
# Unrecoverable read errors per bit read.
ure_per_bit = 1e-15
# Hours assumed for a degraded set with no rebuild running.
open_window_h = 168.0

# Each drive's own rate from its SMART condition and age (docs/drive-risk.md): afr times a
# hazard multiplier, the largest of the conditions' below (a count n above 1 multiplies it by
# 1 + count_growth * log10(n)) times the hard-disk age factor, capped at max_multiplier. A drive
# not read or asleep keeps afr.
[risk.drive]
reallocated_multiplier = 14.0              # ATA 5 > 0 (Pinheiro et al. 2007)
reported_uncorrectable_multiplier = 14.0   # ATA 187 > 0
command_timeout_multiplier = 4.0           # ATA 188 > 0
pending_multiplier = 16.0                  # ATA 197 > 0 (Pinheiro: probational counts)
offline_uncorrectable_multiplier = 39.0    # ATA 198 > 0 (Pinheiro: scan errors)
grown_defects_multiplier = 14.0            # SAS grown defect list > 0
uncorrected_errors_multiplier = 14.0       # SAS uncorrected read/write/verify errors > 0
media_errors_multiplier = 14.0             # NVMe media errors > 0
spare_below_threshold_multiplier = 16.0    # NVMe available spare at or below its threshold
worn_out_multiplier = 4.0                  # NVMe percentage_used >= 100
failed_multiplier = 100.0                  # SMART health FAILED, NVMe critical warning bits 2-5
count_growth = 0.5
# Hard disks' bathtub over power-on hours.
infant_hours = 2190.0
infant_multiplier = 1.75
wearout_start_hours = 26298.0
wearout_per_year = 0.5
wearout_max = 4.0
max_multiplier = 100.0

# MD RAID arrays (/proc/mdstat, /sys/block/mdX/md): state, rebuild progress and ETA, risk.
[md]
enabled = true
# A running resync/recovery/check/reshape that has not moved for this many samples is "stalled".
stall_polls = 60
# Seconds of progress samples our ETA's rate is measured over.
eta_window_s = 600.0
# Member details are re-read every this many samples, and at once when mdstat shows a change.
member_refresh_polls = 30

# ZFS pools: cheap state from /proc/spl/kstat/zfs every sample; `zpool status` and
# `zpool list -Hp` on their own thread, with a timeout, at their own interval.
[zpool]
enabled = true
# The zpool program (a name looked up in PATH, or an absolute path).
zpool = "zpool"
# Seconds between zpool runs, and how long one may take before it is killed.
interval_s = 60.0
timeout_s = 10.0
# Allocated share of the pool above which capacity_over_85 is set.
capacity_threshold_pct = 85.0

# dm-multipath maps: each path's state every sample (sysfs, and the device-mapper ioctl on the
# real /sys), transitions, flapping, active vs preferred path group.
[mpath]
enabled = true
# A path is "flapping" while it has at least flap_threshold state changes in flap_window_s.
flap_window_s = 600.0
flap_threshold = 3
# dmsetup is used when the ioctl is not available (and on a fixture root), every
# dmsetup_interval_s, killed after command_timeout_s.
dmsetup = "dmsetup"
dmsetup_interval_s = 30.0
command_timeout_s = 5.0
use_ioctl = true
dm_control = "/dev/mapper/control"
# multipathd, when it runs, adds path-group priorities and checker states.
use_multipathd = true
multipathd_socket = "/org/kernel/linux/storage/multipathd"
multipathd = "multipathd"
multipathd_interval_s = 30.0

# Filesystem capacity: every mount of <proc_root>/self/mountinfo not excluded below, measured
# with statvfs(3) on its own thread every `interval` (never more often than report_interval);
# a statvfs that hangs (a dead NFS server) for timeout_s is skipped until it answers. The fill
# rate and time to full are measured over fill_window (reported once a twelfth of it is covered).
[fs]
enabled = true
interval = "60s"
fill_window = "6h"
timeout_s = 5.0
# Pseudo filesystems, tmpfs and container layers (globs on the type), and the kernel's and
# container runtimes' trees (globs on the mount point).
exclude_fstypes = ["autofs", "binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs",
  "devpts", "devtmpfs", "efivarfs", "fuse.gvfsd-fuse", "fuse.lxcfs", "fusectl", "hugetlbfs",
  "mqueue", "nfsd", "nsfs", "overlay", "proc", "pstore", "ramfs", "rpc_pipefs", "securityfs",
  "selinuxfs", "squashfs", "sysfs", "tmpfs", "tracefs", "iso9660", "erofs"]
exclude_mounts = ["/proc/*", "/sys/*", "/dev/*", "/run/credentials/*", "/var/lib/docker/*",
  "/var/lib/containers/*"]
# Where the host's / is, for an agent in a container that sees it at /host.
rootfs = "/"
# The simulator's stand-in for statvfs(3) (numbers per mount point in a file); empty: statvfs.
statvfs_file = ""

# Drive health: `smartctl --json -a -n standby /dev/X` for every whole disk (sd*, nvme*n*) on
# a thread of its own, each disk once per `interval`, the calls spread evenly over it, and the
# members of an MD array that degrades at once. A call is killed (with its process group) after
# `timeout` or when it prints more than max_output_bytes, and reported; at most max_running run
# at once. A sleeping disk is not woken (it keeps its last reading, asleep=true). Without
# smartctl: one info line, nothing else. See docs/metrics-drive.md.
[drive]
enabled = true
# The smartctl program (a name looked up in PATH, or a path); smartmontools >= 7.0. With a
# sys_root other than /sys (a fixture tree, or the host's /sys seen from a container) only a
# smartctl given by path is run.
smartctl = "smartctl"
interval = "30m"
timeout = "60s"
max_output_bytes = 1048576
max_running = 4
# Disks not read (globs on kernel names, or bus/N:megaraid,ID for disks behind a controller).
exclude = []
# Disks behind a MegaRAID/PERC controller (listed by `smartctl --scan`, read with
# -d megaraid,N /dev/bus/N) when /proc/devices shows one.
megaraid = true
# smartd's JSON state files (`smartd -j /var/lib/smartmontools/smartd.`, smartmontools'
# development tree after 7.5, in no release yet):
# a disk whose file in this directory was written within smartd_state_max_age is read from it
# instead of running smartctl; without a fresh file, smartctl reads it. Unset: always smartctl.
# smartd_state_dir = "/var/lib/smartmontools"
smartd_state_max_age = "1h"
# smartd's attribute logs (`smartd -A PREFIX`, every smartmontools 7.x; built in, with this
# prefix, by Debian's, Ubuntu's and openSUSE's packages; elsewhere add `-A` to smartd's options).
# A disk whose log has a line written since its last smartctl reading, within
# smartd_attrlog_max_age, that changes nothing the reading depends on (ATA: no normalised value
# across its threshold, the same raw 5/187/188/197/198/199; NVMe: the same critical warning,
# spare, wear, media errors and error log entries) is not read by smartctl that round: its line
# keeps the reading with the log's temperature and power-on hours (full_read_age_s says how old
# the rest is). smartctl reads every disk at least every smartd_attrlog_full_every rounds (4: every
# 2 h at the 30 min interval; 0 or 1: logs not used). SAS disks only with smartd_attrlog_scsi
# (their verdict and grown defects are not in the log). Empty prefix: not used.
smartd_attrlog_prefix = "/var/lib/smartmontools/attrlog."
smartd_attrlog_max_age = "1h"
smartd_attrlog_full_every = 4
smartd_attrlog_scsi = false
# A SAS disk's non-medium error count is printed by smartctl only as text: a second call,
# `smartctl -l error -n standby`, made every sas_error_log_every rounds (6: every 3 h at the
# 30 min interval; 1: every round), at once for a degraded array's members and for a disk without
# a count yet. The rounds between carry the last count, its age in non_medium_errors_age_s.
sas_error_log_every = 6

# Hardware RAID controllers (MegaRAID/PERC): every `interval`, on a thread of its own,
# `storcli /call show all J`, `/call/vall show all J`, `/call/eall/sall show all J` and, while a
# drive rebuilds, `/call/eall/sall show rebuild J`; each call killed (with its process group)
# after `timeout` or past max_output_bytes, and reported. A rebuild whose progress has not moved
# for stall_after is reported stalled. Without storcli: one info line, nothing else. Needs root
# (the controller's ioctl node). See docs/metrics-hwraid.md.
[hwraid]
enabled = true
# The program (a name looked up in PATH, or a path); empty: storcli64, storcli, perccli64,
# perccli in PATH, then /opt/MegaRAID/storcli/storcli64, /opt/MegaRAID/perccli/perccli64. With a
# sys_root other than /sys only a storcli given by path is run.
storcli = ""
interval = "60s"
timeout = "60s"
max_output_bytes = 4194304
stall_after = "2h"

# Batch jobs: per-job CPU efficiency, block I/O, pressure and memory from the cgroup v2
# directories of HTCondor and Slurm jobs (and of the globs below) under <sys_root>/fs/cgroup,
# read once per report interval. A host without cgroup v2 logs one line and stays silent.
# See docs/metrics-jobs.md.
[jobs]
enabled = true
# Jobs read one by one at most; those over it get no job line and are counted in the jobs
# line's count, dropped and totals (one warning the first time).
max_jobs = 500
# io_some_pct at or above which a job counts in the jobs line's `stalled`.
stall_threshold_pct = 20.0
# HTCondor's BASE_CGROUP (one value per slot type that sets its own).
htcondor_base_cgroup = ["htcondor"]
# More job directories, relative to the cgroup mount; * and ? within one path component.
globs = []
# globs = ["machine.slice/*.scope", "system.slice/docker-*.scope"]

# Delivery when `output` is an http(s):// URL: the collector (/write or /api/v2/write) or InfluxDB
# itself (v1 /write?db=, v2 /api/v2/write?org=&bucket=, v3 /api/v3/write_lp?db=). Reports are
# spooled on disk first and deleted only after the server acknowledged them.
[http]
# File holding the token, sent as "Authorization: Token <token>".
# token_file = "/etc/storwatch/token"
# gzip request bodies.
gzip = true
# The durable spool, and its bound: past it the oldest data is dropped (and counted).
spool_dir = "/var/lib/storwatch/spool"
spool_max_bytes = 268435456
# Whole-request timeout, seconds.
timeout_s = 10.0
# Largest request body when draining a backlog, bytes.
max_batch_bytes = 1048576
# Retry delay after a failure, doubled up to the cap, seconds (a 429/503 Retry-After wins).
backoff_min_s = 1.0
backoff_max_s = 60.0
# TLS: CA bundle for the server's certificate (default: built-in roots), and a client
# certificate and key for mutual TLS.
# ca_file = "/etc/storwatch/ca.pem"
# client_cert_file = "/etc/storwatch/agent.pem"
# client_key_file = "/etc/storwatch/agent.key"

# Size rotation when `output` is file:PATH: when the next report would take PATH past
# max_file_bytes it is renamed PATH.1 (PATH.1 to PATH.2, …) and at most keep_files rotated files
# are kept, the oldest dropped: at most (keep_files + 1) × max_file_bytes on disk. A report is
# never split across two files. Applied on SIGHUP.
[file]
max_file_bytes = 104857600
keep_files = 5

# Prometheus exposition: the latest reports at http://<listen>/metrics in the text format, for
# sites that scrape (names storwatch_<measurement>_<field>, tags as labels). Empty: off.
# max_connections: open at once (at most half the open-file limit); a new one beyond resets the
# oldest that has not finished its request.
[prometheus]
listen = ""
max_connections = 2048
"#;

/// A configuration problem, with the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is invalid or names an unknown key.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why, with line and column.
        source: toml::de::Error,
    },
    /// Values that do not fit together.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Loads `path`. A missing file is an error only when `required` (it was named explicitly);
    /// the default path may be absent, and then the defaults apply.
    pub fn load(path: &Path, required: bool) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text).map_err(|source| ConfigError::Parse {
                path: path.to_owned(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Checks values that serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let s = self.sample_interval.as_millis();
        let r = self.report_interval.as_millis();
        if s < 10 {
            return Err(ConfigError::Invalid(
                "sample_interval must be at least 10ms".into(),
            ));
        }
        if r < s || r % s != 0 {
            return Err(ConfigError::Invalid(format!(
                "report_interval ({}) must be a whole multiple of sample_interval ({})",
                duration::format(self.report_interval),
                duration::format(self.sample_interval)
            )));
        }
        if !(0.0..=100.0).contains(&self.saturation_threshold_pct) {
            return Err(ConfigError::Invalid(
                "saturation_threshold_pct must be between 0 and 100".into(),
            ));
        }
        self.risk.drive.validate().map_err(ConfigError::Invalid)?;
        self.jobs.validate().map_err(ConfigError::Invalid)?;
        for (k, v) in &self.tags {
            if k.is_empty() || v.is_empty() || k == "host" {
                return Err(ConfigError::Invalid(format!(
                    "tag {k:?}={v:?}: tag keys and values must be non-empty, and host is set by `host`"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_default_config_is_the_default() {
        let parsed = Config::parse(DEFAULT_CONFIG).expect("default config parses");
        assert_eq!(parsed, Config::default());
        parsed.validate().expect("defaults are valid");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_line() {
        let err = Config::parse("sample_interval = \"1s\"\nsampel_interval = \"2s\"\n")
            .expect_err("typo rejected");
        let msg = err.to_string();
        assert!(msg.contains("sampel_interval"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn intervals_must_fit_together() {
        let mut c = Config {
            report_interval: Duration::from_millis(2500),
            ..Config::default()
        };
        assert!(c.validate().is_err());
        c.report_interval = Duration::from_secs(60);
        assert!(c.validate().is_ok());
        c.sample_interval = Duration::from_secs(0);
        assert!(c.validate().is_err());
    }

    #[test]
    fn missing_default_file_is_fine_missing_named_file_is_not() {
        let p = Path::new("/nonexistent/storwatch/agent.toml");
        assert!(Config::load(p, false).is_ok());
        assert!(Config::load(p, true).is_err());
    }
}
