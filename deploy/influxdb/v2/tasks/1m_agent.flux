// storwatch: cq_1m_agent of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "agent" in storwatch/raw -> 1m windows -> "agent" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_agent", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "agent")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["cycle_cpu_us", "report_cpu_us", "process_cpu_us", "lines"], fn: mean),
        data |> rollup(fields: ["cycle_cpu_max_us", "rss_kb", "spool_bytes"], fn: max),
        data |> rollup(fields: ["samples", "source_errors"], fn: sum),
        data |> rollup(fields: ["devices", "interfaces", "dropped_lines", "uptime_s"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
