// storwatch: cq_1m_raid_pd of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "raid_pd" in storwatch/raw -> 1m windows -> "raid_pd" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_raid_pd", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "raid_pd")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["state", "ok", "media_errors", "other_errors", "predictive_failures", "smart_alert", "rebuild_progress_pct", "rebuild_eta_s"], fn: last),
        data |> rollup(fields: ["temperature_c", "failure_probability"], fn: max),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
