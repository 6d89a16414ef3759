// storwatch: cq_1h_pressure of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "pressure" in storwatch/rp_1m -> 1h windows -> "pressure" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_pressure", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "pressure")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["io_some_avg10", "io_some_avg60", "io_full_avg10", "io_full_avg60", "io_some_pct", "io_full_pct"], fn: mean),
        data |> rollup(fields: ["io_some_total_us", "io_full_total_us"], fn: last),
        data |> rollup(fields: ["io_some_pct_10s_max", "io_full_pct_10s_max"], fn: max),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
