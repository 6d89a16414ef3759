// storwatch: cq_1m_mem of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "mem" in storwatch/raw -> 1m windows -> "mem" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_mem", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "mem")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["dirty_kb", "writeback_kb", "available_kb", "cached_kb"], fn: mean),
        data |> rollup(fields: ["total_kb"], fn: last),
        data |> rollup(fields: ["dirty_kb"], fn: max) |> map(fn: (r) => ({r with _field: "dirty_kb_10s_max"})),
        data |> rollup(fields: ["writeback_kb"], fn: max) |> map(fn: (r) => ({r with _field: "writeback_kb_10s_max"})),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
