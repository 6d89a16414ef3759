"""storwatch rollups on InfluxDB 3 Core or Enterprise: a Processing Engine plugin (schedule trigger).

InfluxDB 3 has neither continuous queries (1.x) nor tasks (2.x); the documented way to downsample
is a Python plugin run by a schedule trigger that queries a window with SQL and writes the result
back. This plugin does, per level, what deploy/influxdb/setup.influxql's continuous queries do:
the same measurements, fields, aggregates and tags (every tag column is grouped on, as GROUP BY *),
windows stamped with their start, and the same resampling window (the last 5 min every minute, the
last 2 h every hour).

A database per level, since InfluxDB 3 has no retention policies; the names follow InfluxDB 3's
"db/rp" convention for InfluxQL, so that `FROM "rp_1m"."disk"` on database storwatch still names
the 1 min rollup (deploy/influxdb/v3/setup.sh creates them):
    storwatch         raw 10 s reports (what the collector writes), 14 d
    storwatch/rp_1m   1 min rollups, from storwatch, 90 d
    storwatch/rp_1h   1 h rollups, from storwatch/rp_1m, 1826 d
Each trigger runs on its source database (the plugin only queries the database its trigger is on)
and writes into the next with write_to_db:
    influxdb3 create trigger --database storwatch --plugin-filename storwatch_rollups.py \
        --trigger-spec "every:1m" --trigger-arguments level=1m storwatch_rollups_1m
    influxdb3 create trigger --database storwatch/rp_1m --plugin-filename storwatch_rollups.py \
        --trigger-spec "every:1h" --trigger-arguments level=1h storwatch_rollups_1h
(as on 1.x the two levels fire at the same instant in no guaranteed order: the 2 h window
finalises each hour on the next run, once the 1 min rollup of its last minute exists).
Arguments: level (1m or 1h), window (default 5m / 2h: how far back each run recomputes),
target_database (default storwatch/rp_<level>), end (an RFC 3339 time: backfill the window
before it instead of the one before now; use with `influxdb3 test schedule_plugin`).

The ROLLUPS table below is generated, with setup.influxql's continuous queries, from the metric
contract (contract/*.yaml) by `cargo xtask gen`; `cargo xtask check` fails when it drifts.
"""

from datetime import datetime, timedelta, timezone

# (level, source rp, source measurement, target rp, target measurement,
#  [(InfluxQL function, source field, output field), ...])
# BEGIN GENERATED ROLLUPS
ROLLUPS = [
    ("1m", "raw", "disk", "rp_1m", "disk", [
        ("mean", "r_per_s", "r_per_s"),
        ("mean", "w_per_s", "w_per_s"),
        ("mean", "d_per_s", "d_per_s"),
        ("mean", "f_per_s", "f_per_s"),
        ("mean", "rkb_per_s", "rkb_per_s"),
        ("mean", "wkb_per_s", "wkb_per_s"),
        ("mean", "dkb_per_s", "dkb_per_s"),
        ("mean", "rrqm_per_s", "rrqm_per_s"),
        ("mean", "wrqm_per_s", "wrqm_per_s"),
        ("mean", "drqm_per_s", "drqm_per_s"),
        ("mean", "rrqm_pct", "rrqm_pct"),
        ("mean", "wrqm_pct", "wrqm_pct"),
        ("mean", "r_await_ms", "r_await_ms"),
        ("mean", "w_await_ms", "w_await_ms"),
        ("mean", "d_await_ms", "d_await_ms"),
        ("mean", "f_await_ms", "f_await_ms"),
        ("mean", "await_ms", "await_ms"),
        ("mean", "rareq_sz_kb", "rareq_sz_kb"),
        ("mean", "wareq_sz_kb", "wareq_sz_kb"),
        ("mean", "dareq_sz_kb", "dareq_sz_kb"),
        ("mean", "aqu_sz", "aqu_sz"),
        ("mean", "util_pct", "util_pct"),
        ("mean", "svctm_ms", "svctm_ms"),
        ("max", "aqu_sz_max", "aqu_sz_max"),
        ("max", "util_max_pct", "util_max_pct"),
        ("max", "util_p95_pct", "util_p95_pct"),
        ("max", "in_flight", "in_flight"),
        ("sum", "saturated_s", "saturated_s"),
        ("sum", "interval_s", "interval_s"),
        ("sum", "resets", "resets"),
        ("max", "util_pct", "util_pct_10s_max"),
        ("max", "await_ms", "await_ms_10s_max"),
        ("max", "r_await_ms", "r_await_ms_10s_max"),
        ("max", "w_await_ms", "w_await_ms_10s_max"),
        ("max", "aqu_sz", "aqu_sz_10s_max"),
        ("max", "rkb_per_s", "rkb_per_s_10s_max"),
        ("max", "wkb_per_s", "wkb_per_s_10s_max"),
    ]),
    ("1m", "raw", "net", "rp_1m", "net", [
        ("mean", "rx_bytes_per_s", "rx_bytes_per_s"),
        ("mean", "tx_bytes_per_s", "tx_bytes_per_s"),
        ("mean", "rx_packets_per_s", "rx_packets_per_s"),
        ("mean", "tx_packets_per_s", "tx_packets_per_s"),
        ("mean", "rx_compressed_per_s", "rx_compressed_per_s"),
        ("mean", "tx_compressed_per_s", "tx_compressed_per_s"),
        ("mean", "rx_multicast_per_s", "rx_multicast_per_s"),
        ("mean", "rx_errors_per_s", "rx_errors_per_s"),
        ("mean", "tx_errors_per_s", "tx_errors_per_s"),
        ("mean", "rx_drops_per_s", "rx_drops_per_s"),
        ("mean", "tx_drops_per_s", "tx_drops_per_s"),
        ("mean", "collisions_per_s", "collisions_per_s"),
        ("mean", "tx_carrier_per_s", "tx_carrier_per_s"),
        ("mean", "rx_frame_per_s", "rx_frame_per_s"),
        ("mean", "rx_fifo_per_s", "rx_fifo_per_s"),
        ("mean", "tx_fifo_per_s", "tx_fifo_per_s"),
        ("mean", "util_pct", "util_pct"),
        ("max", "rx_bytes_max_per_s", "rx_bytes_max_per_s"),
        ("max", "tx_bytes_max_per_s", "tx_bytes_max_per_s"),
        ("max", "util_max_pct", "util_max_pct"),
        ("sum", "interval_s", "interval_s"),
        ("last", "speed_mbps", "speed_mbps"),
        ("last", "operstate", "operstate"),
        ("last", "carrier_changes", "carrier_changes"),
        ("last", "mtu", "mtu"),
        ("max", "util_pct", "util_pct_10s_max"),
        ("max", "rx_drops_per_s", "rx_drops_per_s_10s_max"),
        ("max", "tx_drops_per_s", "tx_drops_per_s_10s_max"),
        ("max", "rx_errors_per_s", "rx_errors_per_s_10s_max"),
    ]),
    ("1m", "raw", "disk_tunables", "rp_1m", "disk_tunables", [
        ("last", "read_ahead_kb", "read_ahead_kb"),
        ("last", "scheduler", "scheduler"),
        ("last", "nr_requests", "nr_requests"),
        ("last", "max_sectors_kb", "max_sectors_kb"),
    ]),
    ("1m", "raw", "cpu", "rp_1m", "cpu", [
        ("mean", "user_pct", "user_pct"),
        ("mean", "nice_pct", "nice_pct"),
        ("mean", "system_pct", "system_pct"),
        ("mean", "iowait_pct", "iowait_pct"),
        ("mean", "steal_pct", "steal_pct"),
        ("mean", "idle_pct", "idle_pct"),
        ("last", "cpus", "cpus"),
        ("max", "iowait_pct", "iowait_pct_10s_max"),
    ]),
    ("1m", "raw", "pressure", "rp_1m", "pressure", [
        ("mean", "io_some_avg10", "io_some_avg10"),
        ("mean", "io_some_avg60", "io_some_avg60"),
        ("mean", "io_full_avg10", "io_full_avg10"),
        ("mean", "io_full_avg60", "io_full_avg60"),
        ("mean", "io_some_pct", "io_some_pct"),
        ("mean", "io_full_pct", "io_full_pct"),
        ("last", "io_some_total_us", "io_some_total_us"),
        ("last", "io_full_total_us", "io_full_total_us"),
        ("max", "io_some_pct", "io_some_pct_10s_max"),
        ("max", "io_full_pct", "io_full_pct_10s_max"),
    ]),
    ("1m", "raw", "mem", "rp_1m", "mem", [
        ("mean", "dirty_kb", "dirty_kb"),
        ("mean", "writeback_kb", "writeback_kb"),
        ("mean", "available_kb", "available_kb"),
        ("mean", "cached_kb", "cached_kb"),
        ("last", "total_kb", "total_kb"),
        ("max", "dirty_kb", "dirty_kb_10s_max"),
        ("max", "writeback_kb", "writeback_kb_10s_max"),
    ]),
    ("1m", "raw", "md", "rp_1m", "md", [
        ("mean", "sync_speed_kbps", "sync_speed_kbps"),
        ("max", "failed", "failed"),
        ("max", "degraded", "degraded"),
        ("max", "mismatch_cnt", "mismatch_cnt"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "members_at_risk", "members_at_risk"),
        ("min", "active", "active"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "members", "members"),
        ("last", "spare", "spare"),
        ("last", "state", "state"),
        ("last", "sync_action", "sync_action"),
        ("last", "sync_pct", "sync_pct"),
        ("last", "sync_eta_s", "sync_eta_s"),
        ("last", "stalled", "stalled"),
    ]),
    ("1m", "raw", "md_member", "rp_1m", "md_member", [
        ("max", "errors", "errors"),
        ("last", "state", "state"),
        ("last", "failed", "failed"),
        ("last", "spare", "spare"),
    ]),
    ("1m", "raw", "mpath", "rp_1m", "mpath", [
        ("max", "paths_failed", "paths_failed"),
        ("max", "paths_lost", "paths_lost"),
        ("max", "flapping_paths", "flapping_paths"),
        ("min", "paths_active", "paths_active"),
        ("sum", "transitions", "transitions"),
        ("last", "paths", "paths"),
        ("last", "groups", "groups"),
        ("last", "active_group", "active_group"),
        ("last", "preferred_group", "preferred_group"),
        ("last", "on_preferred_group", "on_preferred_group"),
        ("last", "queue_if_no_path", "queue_if_no_path"),
        ("last", "hung_io", "hung_io"),
        ("last", "hw_handler", "hw_handler"),
        ("last", "features", "features"),
    ]),
    ("1m", "raw", "mpath_path", "rp_1m", "mpath_path", [
        ("max", "fail_count", "fail_count"),
        ("max", "transitions_window", "transitions_window"),
        ("sum", "transitions", "transitions"),
        ("last", "active", "active"),
        ("last", "state", "state"),
        ("last", "flapping", "flapping"),
        ("last", "checker", "checker"),
        ("last", "priority", "priority"),
    ]),
    ("1m", "raw", "fs", "rp_1m", "fs", [
        ("max", "used_pct", "used_pct"),
        ("max", "inodes_used_pct", "inodes_used_pct"),
        ("min", "time_to_full_s", "time_to_full_s"),
        ("mean", "fill_rate_bytes_per_s", "fill_rate_bytes_per_s"),
        ("last", "size_bytes", "size_bytes"),
        ("last", "used_bytes", "used_bytes"),
        ("last", "avail_bytes", "avail_bytes"),
        ("last", "inodes", "inodes"),
        ("last", "inodes_used", "inodes_used"),
        ("last", "inodes_free", "inodes_free"),
        ("last", "readonly", "readonly"),
    ]),
    ("1m", "raw", "zpool", "rp_1m", "zpool", [
        ("mean", "scan_rate_bps", "scan_rate_bps"),
        ("max", "capacity_pct", "capacity_pct"),
        ("max", "read_errors", "read_errors"),
        ("max", "write_errors", "write_errors"),
        ("max", "cksum_errors", "cksum_errors"),
        ("max", "data_errors", "data_errors"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "status_age_s", "status_age_s"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "health", "health"),
        ("last", "size_bytes", "size_bytes"),
        ("last", "alloc_bytes", "alloc_bytes"),
        ("last", "free_bytes", "free_bytes"),
        ("last", "fragmentation_pct", "fragmentation_pct"),
        ("last", "scan", "scan"),
        ("last", "scan_state", "scan_state"),
        ("last", "scan_pct", "scan_pct"),
        ("last", "scan_eta_s", "scan_eta_s"),
        ("last", "fault_under_online", "fault_under_online"),
        ("last", "capacity_over_85", "capacity_over_85"),
    ]),
    ("1m", "raw", "zpool_vdev", "rp_1m", "zpool_vdev", [
        ("max", "read_errors", "read_errors"),
        ("max", "write_errors", "write_errors"),
        ("max", "cksum_errors", "cksum_errors"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "members_at_risk", "members_at_risk"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "state", "state"),
    ]),
    ("1m", "raw", "drive", "rp_1m", "drive", [
        ("last", "health_ok", "health_ok"),
        ("max", "temperature_c", "temperature_c"),
        ("last", "power_on_hours", "power_on_hours"),
        ("last", "exit_status", "exit_status"),
        ("last", "reallocated_sectors", "reallocated_sectors"),
        ("last", "reported_uncorrect", "reported_uncorrect"),
        ("last", "command_timeout", "command_timeout"),
        ("last", "pending_sectors", "pending_sectors"),
        ("last", "offline_uncorrectable", "offline_uncorrectable"),
        ("last", "udma_crc_errors", "udma_crc_errors"),
        ("last", "grown_defects", "grown_defects"),
        ("last", "uncorrected_read_errors", "uncorrected_read_errors"),
        ("last", "uncorrected_write_errors", "uncorrected_write_errors"),
        ("last", "uncorrected_verify_errors", "uncorrected_verify_errors"),
        ("last", "non_medium_errors", "non_medium_errors"),
        ("last", "critical_warning", "critical_warning"),
        ("min", "available_spare_pct", "available_spare_pct"),
        ("last", "available_spare_threshold_pct", "available_spare_threshold_pct"),
        ("max", "percentage_used_pct", "percentage_used_pct"),
        ("last", "media_errors", "media_errors"),
        ("last", "unsafe_shutdowns", "unsafe_shutdowns"),
        ("max", "failure_probability", "failure_probability"),
        ("last", "read_ok", "read_ok"),
        ("last", "asleep", "asleep"),
        ("max", "last_read_age_s", "last_read_age_s"),
        ("max", "full_read_age_s", "full_read_age_s"),
        ("last", "read_error", "read_error"),
    ]),
    ("1m", "raw", "raid_controller", "rp_1m", "raid_controller", [
        ("last", "status", "status"),
        ("last", "ok", "ok"),
        ("last", "vds", "vds"),
        ("max", "vds_degraded", "vds_degraded"),
        ("max", "vds_offline", "vds_offline"),
        ("last", "pds", "pds"),
        ("max", "pds_failed", "pds_failed"),
        ("max", "roc_temperature_c", "roc_temperature_c"),
        ("last", "bbu_present", "bbu_present"),
        ("last", "bbu_state", "bbu_state"),
        ("last", "bbu_ok", "bbu_ok"),
        ("last", "read_ok", "read_ok"),
        ("max", "last_read_age_s", "last_read_age_s"),
        ("last", "read_error", "read_error"),
    ]),
    ("1m", "raw", "raid_vd", "rp_1m", "raid_vd", [
        ("last", "state", "state"),
        ("last", "ok", "ok"),
        ("last", "degraded", "degraded"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "members", "members"),
        ("min", "members_online", "members_online"),
        ("max", "members_rebuilding", "members_rebuilding"),
        ("last", "rebuild_progress_pct", "rebuild_progress_pct"),
        ("last", "rebuild_eta_s", "rebuild_eta_s"),
        ("last", "rebuild_stalled", "rebuild_stalled"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "members_at_risk", "members_at_risk"),
        ("last", "cache", "cache"),
        ("last", "write_back_configured", "write_back_configured"),
        ("last", "write_back_active", "write_back_active"),
        ("last", "size_bytes", "size_bytes"),
    ]),
    ("1m", "raw", "raid_pd", "rp_1m", "raid_pd", [
        ("last", "state", "state"),
        ("last", "ok", "ok"),
        ("last", "media_errors", "media_errors"),
        ("last", "other_errors", "other_errors"),
        ("last", "predictive_failures", "predictive_failures"),
        ("last", "smart_alert", "smart_alert"),
        ("max", "temperature_c", "temperature_c"),
        ("last", "rebuild_progress_pct", "rebuild_progress_pct"),
        ("last", "rebuild_eta_s", "rebuild_eta_s"),
        ("max", "failure_probability", "failure_probability"),
    ]),
    ("1m", "raw", "agent", "rp_1m", "agent", [
        ("mean", "cycle_cpu_us", "cycle_cpu_us"),
        ("mean", "report_cpu_us", "report_cpu_us"),
        ("mean", "process_cpu_us", "process_cpu_us"),
        ("mean", "lines", "lines"),
        ("max", "cycle_cpu_max_us", "cycle_cpu_max_us"),
        ("max", "rss_kb", "rss_kb"),
        ("max", "spool_bytes", "spool_bytes"),
        ("sum", "samples", "samples"),
        ("sum", "source_errors", "source_errors"),
        ("last", "devices", "devices"),
        ("last", "interfaces", "interfaces"),
        ("last", "dropped_lines", "dropped_lines"),
        ("last", "uptime_s", "uptime_s"),
    ]),
    ("1m", "raw", "agent_source", "rp_1m", "agent_source", [
        ("sum", "errors", "errors"),
        ("last", "errors_total", "errors_total"),
    ]),
    ("1m", "raw", "collector_heartbeat", "rp_1m", "collector_heartbeat", [
        ("max", "age_s", "age_s"),
        ("sum", "lines", "lines"),
        ("last", "last_seen_s", "last_seen_s"),
    ]),
    ("1m", "raw", "event", "rp_1m", "event", [
        ("last", "text", "text"),
        ("last", "from_state", "from_state"),
        ("last", "to_state", "to_state"),
    ]),
    ("1m", "raw", "jobs", "rp_1m", "jobs", [
        ("mean", "cpu_efficiency_pct", "cpu_efficiency_pct"),
        ("mean", "io_stall_pct", "io_stall_pct"),
        ("mean", "io_full_pct", "io_full_pct"),
        ("max", "count", "count"),
        ("max", "dropped", "dropped"),
        ("max", "stalled", "stalled"),
        ("sum", "started", "started"),
        ("sum", "ended", "ended"),
        ("sum", "cpu_s", "cpu_s"),
        ("max", "io_stall_pct", "io_stall_pct_10s_max"),
    ]),
    ("1h", "rp_1m", "disk", "rp_1h", "disk", [
        ("mean", "r_per_s", "r_per_s"),
        ("mean", "w_per_s", "w_per_s"),
        ("mean", "d_per_s", "d_per_s"),
        ("mean", "f_per_s", "f_per_s"),
        ("mean", "rkb_per_s", "rkb_per_s"),
        ("mean", "wkb_per_s", "wkb_per_s"),
        ("mean", "dkb_per_s", "dkb_per_s"),
        ("mean", "rrqm_per_s", "rrqm_per_s"),
        ("mean", "wrqm_per_s", "wrqm_per_s"),
        ("mean", "drqm_per_s", "drqm_per_s"),
        ("mean", "rrqm_pct", "rrqm_pct"),
        ("mean", "wrqm_pct", "wrqm_pct"),
        ("mean", "r_await_ms", "r_await_ms"),
        ("mean", "w_await_ms", "w_await_ms"),
        ("mean", "d_await_ms", "d_await_ms"),
        ("mean", "f_await_ms", "f_await_ms"),
        ("mean", "await_ms", "await_ms"),
        ("mean", "rareq_sz_kb", "rareq_sz_kb"),
        ("mean", "wareq_sz_kb", "wareq_sz_kb"),
        ("mean", "dareq_sz_kb", "dareq_sz_kb"),
        ("mean", "aqu_sz", "aqu_sz"),
        ("mean", "util_pct", "util_pct"),
        ("mean", "svctm_ms", "svctm_ms"),
        ("max", "aqu_sz_max", "aqu_sz_max"),
        ("max", "util_max_pct", "util_max_pct"),
        ("max", "util_p95_pct", "util_p95_pct"),
        ("max", "in_flight", "in_flight"),
        ("sum", "saturated_s", "saturated_s"),
        ("sum", "interval_s", "interval_s"),
        ("sum", "resets", "resets"),
        ("max", "util_pct_10s_max", "util_pct_10s_max"),
        ("max", "await_ms_10s_max", "await_ms_10s_max"),
        ("max", "r_await_ms_10s_max", "r_await_ms_10s_max"),
        ("max", "w_await_ms_10s_max", "w_await_ms_10s_max"),
        ("max", "aqu_sz_10s_max", "aqu_sz_10s_max"),
        ("max", "rkb_per_s_10s_max", "rkb_per_s_10s_max"),
        ("max", "wkb_per_s_10s_max", "wkb_per_s_10s_max"),
    ]),
    ("1h", "rp_1m", "net", "rp_1h", "net", [
        ("mean", "rx_bytes_per_s", "rx_bytes_per_s"),
        ("mean", "tx_bytes_per_s", "tx_bytes_per_s"),
        ("mean", "rx_packets_per_s", "rx_packets_per_s"),
        ("mean", "tx_packets_per_s", "tx_packets_per_s"),
        ("mean", "rx_compressed_per_s", "rx_compressed_per_s"),
        ("mean", "tx_compressed_per_s", "tx_compressed_per_s"),
        ("mean", "rx_multicast_per_s", "rx_multicast_per_s"),
        ("mean", "rx_errors_per_s", "rx_errors_per_s"),
        ("mean", "tx_errors_per_s", "tx_errors_per_s"),
        ("mean", "rx_drops_per_s", "rx_drops_per_s"),
        ("mean", "tx_drops_per_s", "tx_drops_per_s"),
        ("mean", "collisions_per_s", "collisions_per_s"),
        ("mean", "tx_carrier_per_s", "tx_carrier_per_s"),
        ("mean", "rx_frame_per_s", "rx_frame_per_s"),
        ("mean", "rx_fifo_per_s", "rx_fifo_per_s"),
        ("mean", "tx_fifo_per_s", "tx_fifo_per_s"),
        ("mean", "util_pct", "util_pct"),
        ("max", "rx_bytes_max_per_s", "rx_bytes_max_per_s"),
        ("max", "tx_bytes_max_per_s", "tx_bytes_max_per_s"),
        ("max", "util_max_pct", "util_max_pct"),
        ("sum", "interval_s", "interval_s"),
        ("last", "speed_mbps", "speed_mbps"),
        ("last", "operstate", "operstate"),
        ("last", "carrier_changes", "carrier_changes"),
        ("last", "mtu", "mtu"),
        ("max", "util_pct_10s_max", "util_pct_10s_max"),
        ("max", "rx_drops_per_s_10s_max", "rx_drops_per_s_10s_max"),
        ("max", "tx_drops_per_s_10s_max", "tx_drops_per_s_10s_max"),
        ("max", "rx_errors_per_s_10s_max", "rx_errors_per_s_10s_max"),
    ]),
    ("1h", "rp_1m", "disk_tunables", "rp_1h", "disk_tunables", [
        ("last", "read_ahead_kb", "read_ahead_kb"),
        ("last", "scheduler", "scheduler"),
        ("last", "nr_requests", "nr_requests"),
        ("last", "max_sectors_kb", "max_sectors_kb"),
    ]),
    ("1h", "rp_1m", "cpu", "rp_1h", "cpu", [
        ("mean", "user_pct", "user_pct"),
        ("mean", "nice_pct", "nice_pct"),
        ("mean", "system_pct", "system_pct"),
        ("mean", "iowait_pct", "iowait_pct"),
        ("mean", "steal_pct", "steal_pct"),
        ("mean", "idle_pct", "idle_pct"),
        ("last", "cpus", "cpus"),
        ("max", "iowait_pct_10s_max", "iowait_pct_10s_max"),
    ]),
    ("1h", "rp_1m", "pressure", "rp_1h", "pressure", [
        ("mean", "io_some_avg10", "io_some_avg10"),
        ("mean", "io_some_avg60", "io_some_avg60"),
        ("mean", "io_full_avg10", "io_full_avg10"),
        ("mean", "io_full_avg60", "io_full_avg60"),
        ("mean", "io_some_pct", "io_some_pct"),
        ("mean", "io_full_pct", "io_full_pct"),
        ("last", "io_some_total_us", "io_some_total_us"),
        ("last", "io_full_total_us", "io_full_total_us"),
        ("max", "io_some_pct_10s_max", "io_some_pct_10s_max"),
        ("max", "io_full_pct_10s_max", "io_full_pct_10s_max"),
    ]),
    ("1h", "rp_1m", "mem", "rp_1h", "mem", [
        ("mean", "dirty_kb", "dirty_kb"),
        ("mean", "writeback_kb", "writeback_kb"),
        ("mean", "available_kb", "available_kb"),
        ("mean", "cached_kb", "cached_kb"),
        ("last", "total_kb", "total_kb"),
        ("max", "dirty_kb_10s_max", "dirty_kb_10s_max"),
        ("max", "writeback_kb_10s_max", "writeback_kb_10s_max"),
    ]),
    ("1h", "rp_1m", "md", "rp_1h", "md", [
        ("mean", "sync_speed_kbps", "sync_speed_kbps"),
        ("max", "failed", "failed"),
        ("max", "degraded", "degraded"),
        ("max", "mismatch_cnt", "mismatch_cnt"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "members_at_risk", "members_at_risk"),
        ("min", "active", "active"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "members", "members"),
        ("last", "spare", "spare"),
        ("last", "state", "state"),
        ("last", "sync_action", "sync_action"),
        ("last", "sync_pct", "sync_pct"),
        ("last", "sync_eta_s", "sync_eta_s"),
        ("last", "stalled", "stalled"),
    ]),
    ("1h", "rp_1m", "md_member", "rp_1h", "md_member", [
        ("max", "errors", "errors"),
        ("last", "state", "state"),
        ("last", "failed", "failed"),
        ("last", "spare", "spare"),
    ]),
    ("1h", "rp_1m", "mpath", "rp_1h", "mpath", [
        ("max", "paths_failed", "paths_failed"),
        ("max", "paths_lost", "paths_lost"),
        ("max", "flapping_paths", "flapping_paths"),
        ("min", "paths_active", "paths_active"),
        ("sum", "transitions", "transitions"),
        ("last", "paths", "paths"),
        ("last", "groups", "groups"),
        ("last", "active_group", "active_group"),
        ("last", "preferred_group", "preferred_group"),
        ("last", "on_preferred_group", "on_preferred_group"),
        ("last", "queue_if_no_path", "queue_if_no_path"),
        ("last", "hung_io", "hung_io"),
        ("last", "hw_handler", "hw_handler"),
        ("last", "features", "features"),
    ]),
    ("1h", "rp_1m", "mpath_path", "rp_1h", "mpath_path", [
        ("max", "fail_count", "fail_count"),
        ("max", "transitions_window", "transitions_window"),
        ("sum", "transitions", "transitions"),
        ("last", "active", "active"),
        ("last", "state", "state"),
        ("last", "flapping", "flapping"),
        ("last", "checker", "checker"),
        ("last", "priority", "priority"),
    ]),
    ("1h", "rp_1m", "fs", "rp_1h", "fs", [
        ("max", "used_pct", "used_pct"),
        ("max", "inodes_used_pct", "inodes_used_pct"),
        ("min", "time_to_full_s", "time_to_full_s"),
        ("mean", "fill_rate_bytes_per_s", "fill_rate_bytes_per_s"),
        ("last", "size_bytes", "size_bytes"),
        ("last", "used_bytes", "used_bytes"),
        ("last", "avail_bytes", "avail_bytes"),
        ("last", "inodes", "inodes"),
        ("last", "inodes_used", "inodes_used"),
        ("last", "inodes_free", "inodes_free"),
        ("last", "readonly", "readonly"),
    ]),
    ("1h", "rp_1m", "zpool", "rp_1h", "zpool", [
        ("mean", "scan_rate_bps", "scan_rate_bps"),
        ("max", "capacity_pct", "capacity_pct"),
        ("max", "read_errors", "read_errors"),
        ("max", "write_errors", "write_errors"),
        ("max", "cksum_errors", "cksum_errors"),
        ("max", "data_errors", "data_errors"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "status_age_s", "status_age_s"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "health", "health"),
        ("last", "size_bytes", "size_bytes"),
        ("last", "alloc_bytes", "alloc_bytes"),
        ("last", "free_bytes", "free_bytes"),
        ("last", "fragmentation_pct", "fragmentation_pct"),
        ("last", "scan", "scan"),
        ("last", "scan_state", "scan_state"),
        ("last", "scan_pct", "scan_pct"),
        ("last", "scan_eta_s", "scan_eta_s"),
        ("last", "fault_under_online", "fault_under_online"),
        ("last", "capacity_over_85", "capacity_over_85"),
    ]),
    ("1h", "rp_1m", "zpool_vdev", "rp_1h", "zpool_vdev", [
        ("max", "read_errors", "read_errors"),
        ("max", "write_errors", "write_errors"),
        ("max", "cksum_errors", "cksum_errors"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "members_at_risk", "members_at_risk"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "state", "state"),
    ]),
    ("1h", "rp_1m", "drive", "rp_1h", "drive", [
        ("last", "health_ok", "health_ok"),
        ("max", "temperature_c", "temperature_c"),
        ("last", "power_on_hours", "power_on_hours"),
        ("last", "exit_status", "exit_status"),
        ("last", "reallocated_sectors", "reallocated_sectors"),
        ("last", "reported_uncorrect", "reported_uncorrect"),
        ("last", "command_timeout", "command_timeout"),
        ("last", "pending_sectors", "pending_sectors"),
        ("last", "offline_uncorrectable", "offline_uncorrectable"),
        ("last", "udma_crc_errors", "udma_crc_errors"),
        ("last", "grown_defects", "grown_defects"),
        ("last", "uncorrected_read_errors", "uncorrected_read_errors"),
        ("last", "uncorrected_write_errors", "uncorrected_write_errors"),
        ("last", "uncorrected_verify_errors", "uncorrected_verify_errors"),
        ("last", "non_medium_errors", "non_medium_errors"),
        ("last", "critical_warning", "critical_warning"),
        ("min", "available_spare_pct", "available_spare_pct"),
        ("last", "available_spare_threshold_pct", "available_spare_threshold_pct"),
        ("max", "percentage_used_pct", "percentage_used_pct"),
        ("last", "media_errors", "media_errors"),
        ("last", "unsafe_shutdowns", "unsafe_shutdowns"),
        ("max", "failure_probability", "failure_probability"),
        ("last", "read_ok", "read_ok"),
        ("last", "asleep", "asleep"),
        ("max", "last_read_age_s", "last_read_age_s"),
        ("max", "full_read_age_s", "full_read_age_s"),
        ("last", "read_error", "read_error"),
    ]),
    ("1h", "rp_1m", "raid_controller", "rp_1h", "raid_controller", [
        ("last", "status", "status"),
        ("last", "ok", "ok"),
        ("last", "vds", "vds"),
        ("max", "vds_degraded", "vds_degraded"),
        ("max", "vds_offline", "vds_offline"),
        ("last", "pds", "pds"),
        ("max", "pds_failed", "pds_failed"),
        ("max", "roc_temperature_c", "roc_temperature_c"),
        ("last", "bbu_present", "bbu_present"),
        ("last", "bbu_state", "bbu_state"),
        ("last", "bbu_ok", "bbu_ok"),
        ("last", "read_ok", "read_ok"),
        ("max", "last_read_age_s", "last_read_age_s"),
        ("last", "read_error", "read_error"),
    ]),
    ("1h", "rp_1m", "raid_vd", "rp_1h", "raid_vd", [
        ("last", "state", "state"),
        ("last", "ok", "ok"),
        ("last", "degraded", "degraded"),
        ("min", "redundancy_left", "redundancy_left"),
        ("last", "members", "members"),
        ("min", "members_online", "members_online"),
        ("max", "members_rebuilding", "members_rebuilding"),
        ("last", "rebuild_progress_pct", "rebuild_progress_pct"),
        ("last", "rebuild_eta_s", "rebuild_eta_s"),
        ("last", "rebuild_stalled", "rebuild_stalled"),
        ("max", "rebuild_risk", "rebuild_risk"),
        ("max", "members_at_risk", "members_at_risk"),
        ("last", "cache", "cache"),
        ("last", "write_back_configured", "write_back_configured"),
        ("last", "write_back_active", "write_back_active"),
        ("last", "size_bytes", "size_bytes"),
    ]),
    ("1h", "rp_1m", "raid_pd", "rp_1h", "raid_pd", [
        ("last", "state", "state"),
        ("last", "ok", "ok"),
        ("last", "media_errors", "media_errors"),
        ("last", "other_errors", "other_errors"),
        ("last", "predictive_failures", "predictive_failures"),
        ("last", "smart_alert", "smart_alert"),
        ("max", "temperature_c", "temperature_c"),
        ("last", "rebuild_progress_pct", "rebuild_progress_pct"),
        ("last", "rebuild_eta_s", "rebuild_eta_s"),
        ("max", "failure_probability", "failure_probability"),
    ]),
    ("1h", "rp_1m", "agent", "rp_1h", "agent", [
        ("mean", "cycle_cpu_us", "cycle_cpu_us"),
        ("mean", "report_cpu_us", "report_cpu_us"),
        ("mean", "process_cpu_us", "process_cpu_us"),
        ("mean", "lines", "lines"),
        ("max", "cycle_cpu_max_us", "cycle_cpu_max_us"),
        ("max", "rss_kb", "rss_kb"),
        ("max", "spool_bytes", "spool_bytes"),
        ("sum", "samples", "samples"),
        ("sum", "source_errors", "source_errors"),
        ("last", "devices", "devices"),
        ("last", "interfaces", "interfaces"),
        ("last", "dropped_lines", "dropped_lines"),
        ("last", "uptime_s", "uptime_s"),
    ]),
    ("1h", "rp_1m", "agent_source", "rp_1h", "agent_source", [
        ("sum", "errors", "errors"),
        ("last", "errors_total", "errors_total"),
    ]),
    ("1h", "rp_1m", "collector_heartbeat", "rp_1h", "collector_heartbeat", [
        ("max", "age_s", "age_s"),
        ("sum", "lines", "lines"),
        ("last", "last_seen_s", "last_seen_s"),
    ]),
    ("1h", "rp_1m", "event", "rp_1h", "event", [
        ("last", "text", "text"),
        ("last", "from_state", "from_state"),
        ("last", "to_state", "to_state"),
    ]),
    ("1h", "rp_1m", "jobs", "rp_1h", "jobs", [
        ("mean", "cpu_efficiency_pct", "cpu_efficiency_pct"),
        ("mean", "io_stall_pct", "io_stall_pct"),
        ("mean", "io_full_pct", "io_full_pct"),
        ("max", "count", "count"),
        ("max", "dropped", "dropped"),
        ("max", "stalled", "stalled"),
        ("sum", "started", "started"),
        ("sum", "ended", "ended"),
        ("sum", "cpu_s", "cpu_s"),
        ("max", "io_stall_pct_10s_max", "io_stall_pct_10s_max"),
    ]),
]
# END GENERATED ROLLUPS

INTERVAL = {"1m": timedelta(minutes=1), "1h": timedelta(hours=1)}
WINDOW = {"1m": timedelta(minutes=5), "1h": timedelta(hours=2)}


def _sql_aggregate(fn, field):
    """The SQL (DataFusion) aggregate that means what the InfluxQL function does."""
    col = _ident(field)
    if fn == "mean":
        return f"avg({col})"
    if fn in ("max", "min", "sum"):
        return f"{fn}({col})"
    if fn == "last":
        # InfluxQL last() is the latest non-null value of the field in the window.
        return f"last_value({col} ORDER BY time) FILTER (WHERE {col} IS NOT NULL)"
    raise ValueError(f"no SQL for {fn}()")


def _ident(name):
    return '"' + name.replace('"', '""') + '"'


def _duration(text):
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return timedelta(seconds=int(text[:-1]) * units[text[-1]])


def _rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _ns(value):
    """The window start as nanoseconds since the epoch, whatever form the query returned it in."""
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000
    return _ns(datetime.fromisoformat(str(value).replace("Z", "+00:00")))


def _columns(influxdb3_local, table):
    """(tag columns, field columns) of a table; both empty when it does not exist yet."""
    rows = influxdb3_local.query(
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = 'iox' AND table_name = '{table}'"
    )
    tags = [r["column_name"] for r in rows if str(r["data_type"]).startswith("Dictionary")]
    fields = {r["column_name"] for r in rows} - set(tags) - {"time"}
    return tags, fields


def _write(influxdb3_local, database, measurement, tags, calls, row):
    line = LineBuilder(measurement)  # noqa: F821 (installed by the processing engine)
    for tag in tags:
        if row.get(tag) not in (None, ""):
            line.tag(tag, str(row[tag]))
    written = 0
    for _, _, out in calls:
        v = row.get(out)
        if v is None:
            continue
        if isinstance(v, bool):
            line.bool_field(out, v)
        elif isinstance(v, int):
            line.int64_field(out, v)
        elif isinstance(v, float):
            line.float64_field(out, v)
        else:
            line.string_field(out, str(v))
        written += 1
    if written == 0:
        return False
    line.time_ns(_ns(row["window_start"]))
    influxdb3_local.write_to_db(database, line)
    return True


def rollup(influxdb3_local, level, rollup_spec, start, end, target_database):
    _, _, source, _, target, calls = rollup_spec
    tags, fields = _columns(influxdb3_local, source)
    present = [c for c in calls if c[1] in fields]
    if not present:
        return 0
    seconds = int(INTERVAL[level].total_seconds())
    select = [f"date_bin(INTERVAL '{seconds} seconds', time) AS window_start"]
    select += [_ident(t) for t in tags]
    select += [f"{_sql_aggregate(fn, src)} AS {_ident(out)}" for fn, src, out in present]
    group = ["window_start"] + [_ident(t) for t in tags]
    sql = (
        f"SELECT {', '.join(select)} FROM {_ident(source)} "
        f"WHERE time >= '{_rfc3339(start)}' AND time < '{_rfc3339(end)}' "
        f"GROUP BY {', '.join(group)}"
    )
    n = 0
    for row in influxdb3_local.query(sql):
        if _write(influxdb3_local, target_database, target, tags, present, row):
            n += 1
    return n


def process_scheduled_call(influxdb3_local, call_time, args=None):
    args = args or {}
    level = args.get("level", "1m")
    if level not in INTERVAL:
        influxdb3_local.error(f"storwatch_rollups: level must be 1m or 1h, not {level!r}")
        return
    step = INTERVAL[level]
    window = _duration(args["window"]) if "window" in args else WINDOW[level]
    target_database = args.get("target_database", f"storwatch/rp_{level}")
    if "end" in args:
        end = datetime.fromisoformat(args["end"].replace("Z", "+00:00"))
    else:
        end = call_time if call_time.tzinfo else call_time.replace(tzinfo=timezone.utc)
    # Whole windows only: the one still filling is rolled up by the next runs (as RESAMPLE FOR).
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    end = epoch + ((end - epoch) // step) * step
    start = end - window
    total = 0
    for spec in ROLLUPS:  # noqa: F821 (generated above)
        if spec[0] != level:
            continue
        try:
            total += rollup(influxdb3_local, level, spec, start, end, target_database)
        except Exception as e:  # one measurement failing must not stop the others
            influxdb3_local.error(f"storwatch_rollups {level} {spec[2]}: {e}")
    influxdb3_local.info(
        f"storwatch_rollups {level}: {total} rows for {_rfc3339(start)}..{_rfc3339(end)} "
        f"into {target_database}"
    )
