// storwatch: cq_1m_raid_vd of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "raid_vd" in storwatch/raw -> 1m windows -> "raid_vd" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_raid_vd", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "raid_vd")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["state", "ok", "degraded", "members", "rebuild_progress_pct", "rebuild_eta_s", "rebuild_stalled", "cache", "write_back_configured", "write_back_active", "size_bytes"], fn: last),
        data |> rollup(fields: ["redundancy_left", "members_online"], fn: min),
        data |> rollup(fields: ["members_rebuilding", "rebuild_risk", "members_at_risk"], fn: max),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
