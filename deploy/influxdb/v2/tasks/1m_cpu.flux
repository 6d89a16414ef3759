// storwatch: cq_1m_cpu of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "cpu" in storwatch/raw -> 1m windows -> "cpu" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_cpu", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "cpu")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["user_pct", "nice_pct", "system_pct", "iowait_pct", "steal_pct", "idle_pct"], fn: mean),
        data |> rollup(fields: ["cpus"], fn: last),
        data |> rollup(fields: ["iowait_pct"], fn: max) |> map(fn: (r) => ({r with _field: "iowait_pct_10s_max"})),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
