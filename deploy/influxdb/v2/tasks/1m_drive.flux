// storwatch: cq_1m_drive of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "drive" in storwatch/raw -> 1m windows -> "drive" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_drive", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "drive")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["health_ok", "power_on_hours", "exit_status", "reallocated_sectors", "reported_uncorrect", "command_timeout", "pending_sectors", "offline_uncorrectable", "udma_crc_errors", "grown_defects", "uncorrected_read_errors", "uncorrected_write_errors", "uncorrected_verify_errors", "non_medium_errors", "critical_warning", "available_spare_threshold_pct", "media_errors", "unsafe_shutdowns", "read_ok", "asleep", "read_error"], fn: last),
        data |> rollup(fields: ["temperature_c", "percentage_used_pct", "failure_probability", "last_read_age_s", "full_read_age_s"], fn: max),
        data |> rollup(fields: ["available_spare_pct"], fn: min),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
