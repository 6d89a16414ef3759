// storwatch: cq_1h_mpath_path of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "mpath_path" in storwatch/rp_1m -> 1h windows -> "mpath_path" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_mpath_path", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "mpath_path")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["fail_count", "transitions_window"], fn: max),
        data |> rollup(fields: ["transitions"], fn: sum),
        data |> rollup(fields: ["active", "state", "flapping", "checker", "priority"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
