// storwatch: cq_1h_raid_vd of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "raid_vd" in storwatch/rp_1m -> 1h windows -> "raid_vd" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_raid_vd", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "raid_vd")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["state", "ok", "degraded", "members", "rebuild_progress_pct", "rebuild_eta_s", "rebuild_stalled", "cache", "write_back_configured", "write_back_active", "size_bytes"], fn: last),
        data |> rollup(fields: ["redundancy_left", "members_online"], fn: min),
        data |> rollup(fields: ["members_rebuilding", "rebuild_risk", "members_at_risk"], fn: max),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
