// storwatch: cq_1m_fs of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "fs" in storwatch/raw -> 1m windows -> "fs" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_fs", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "fs")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["used_pct", "inodes_used_pct"], fn: max),
        data |> rollup(fields: ["time_to_full_s"], fn: min),
        data |> rollup(fields: ["fill_rate_bytes_per_s"], fn: mean),
        data |> rollup(fields: ["size_bytes", "used_bytes", "avail_bytes", "inodes", "inodes_used", "inodes_free", "readonly"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
