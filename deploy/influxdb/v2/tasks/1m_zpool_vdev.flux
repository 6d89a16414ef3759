// storwatch: cq_1m_zpool_vdev of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "zpool_vdev" in storwatch/raw -> 1m windows -> "zpool_vdev" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_zpool_vdev", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "zpool_vdev")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["read_errors", "write_errors", "cksum_errors", "rebuild_risk", "members_at_risk"], fn: max),
        data |> rollup(fields: ["redundancy_left"], fn: min),
        data |> rollup(fields: ["state"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
