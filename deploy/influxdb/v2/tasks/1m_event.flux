// storwatch: cq_1m_event of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "event" in storwatch/raw -> 1m windows -> "event" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_event", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "event")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["text", "from_state", "to_state"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
