// storwatch: cq_1h_zpool of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "zpool" in storwatch/rp_1m -> 1h windows -> "zpool" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_zpool", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "zpool")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["scan_rate_bps"], fn: mean),
        data |> rollup(fields: ["capacity_pct", "read_errors", "write_errors", "cksum_errors", "data_errors", "rebuild_risk", "status_age_s"], fn: max),
        data |> rollup(fields: ["redundancy_left"], fn: min),
        data |> rollup(fields: ["health", "size_bytes", "alloc_bytes", "free_bytes", "fragmentation_pct", "scan", "scan_state", "scan_pct", "scan_eta_s", "fault_under_online", "capacity_over_85"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
