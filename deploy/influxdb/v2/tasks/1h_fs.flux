// storwatch: cq_1h_fs of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "fs" in storwatch/rp_1m -> 1h windows -> "fs" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_fs", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "fs")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["used_pct", "inodes_used_pct"], fn: max),
        data |> rollup(fields: ["time_to_full_s"], fn: min),
        data |> rollup(fields: ["fill_rate_bytes_per_s"], fn: mean),
        data |> rollup(fields: ["size_bytes", "used_bytes", "avail_bytes", "inodes", "inodes_used", "inodes_free", "readonly"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
