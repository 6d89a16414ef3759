// storwatch: cq_1h_drive of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "drive" in storwatch/rp_1m -> 1h windows -> "drive" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_drive", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "drive")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["health_ok", "power_on_hours", "exit_status", "reallocated_sectors", "reported_uncorrect", "command_timeout", "pending_sectors", "offline_uncorrectable", "udma_crc_errors", "grown_defects", "uncorrected_read_errors", "uncorrected_write_errors", "uncorrected_verify_errors", "non_medium_errors", "critical_warning", "available_spare_threshold_pct", "media_errors", "unsafe_shutdowns", "read_ok", "asleep", "read_error"], fn: last),
        data |> rollup(fields: ["temperature_c", "percentage_used_pct", "failure_probability", "last_read_age_s", "full_read_age_s"], fn: max),
        data |> rollup(fields: ["available_spare_pct"], fn: min),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
