// storwatch: cq_1h_mpath of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "mpath" in storwatch/rp_1m -> 1h windows -> "mpath" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_mpath", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "mpath")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["paths_failed", "paths_lost", "flapping_paths"], fn: max),
        data |> rollup(fields: ["paths_active"], fn: min),
        data |> rollup(fields: ["transitions"], fn: sum),
        data |> rollup(fields: ["paths", "groups", "active_group", "preferred_group", "on_preferred_group", "queue_if_no_path", "hung_io", "hw_handler", "features"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
