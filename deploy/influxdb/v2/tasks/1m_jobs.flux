// storwatch: cq_1m_jobs of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "jobs" in storwatch/raw -> 1m windows -> "jobs" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_jobs", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "jobs")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["cpu_efficiency_pct", "io_stall_pct", "io_full_pct"], fn: mean),
        data |> rollup(fields: ["count", "dropped", "stalled"], fn: max),
        data |> rollup(fields: ["started", "ended", "cpu_s"], fn: sum),
        data |> rollup(fields: ["io_stall_pct"], fn: max) |> map(fn: (r) => ({r with _field: "io_stall_pct_10s_max"})),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
