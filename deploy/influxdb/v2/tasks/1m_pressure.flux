// storwatch: cq_1m_pressure of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "pressure" in storwatch/raw -> 1m windows -> "pressure" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_pressure", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "pressure")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["io_some_avg10", "io_some_avg60", "io_full_avg10", "io_full_avg60", "io_some_pct", "io_full_pct"], fn: mean),
        data |> rollup(fields: ["io_some_total_us", "io_full_total_us"], fn: last),
        data |> rollup(fields: ["io_some_pct"], fn: max) |> map(fn: (r) => ({r with _field: "io_some_pct_10s_max"})),
        data |> rollup(fields: ["io_full_pct"], fn: max) |> map(fn: (r) => ({r with _field: "io_full_pct_10s_max"})),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
