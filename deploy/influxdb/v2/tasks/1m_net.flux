// storwatch: cq_1m_net of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "net" in storwatch/raw -> 1m windows -> "net" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_net", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "net")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["rx_bytes_per_s", "tx_bytes_per_s", "rx_packets_per_s", "tx_packets_per_s", "rx_compressed_per_s", "tx_compressed_per_s", "rx_multicast_per_s", "rx_errors_per_s", "tx_errors_per_s", "rx_drops_per_s", "tx_drops_per_s", "collisions_per_s", "tx_carrier_per_s", "rx_frame_per_s", "rx_fifo_per_s", "tx_fifo_per_s", "util_pct"], fn: mean),
        data |> rollup(fields: ["rx_bytes_max_per_s", "tx_bytes_max_per_s", "util_max_pct"], fn: max),
        data |> rollup(fields: ["interval_s"], fn: sum),
        data |> rollup(fields: ["speed_mbps", "operstate", "carrier_changes", "mtu"], fn: last),
        data |> rollup(fields: ["util_pct"], fn: max) |> map(fn: (r) => ({r with _field: "util_pct_10s_max"})),
        data |> rollup(fields: ["rx_drops_per_s"], fn: max) |> map(fn: (r) => ({r with _field: "rx_drops_per_s_10s_max"})),
        data |> rollup(fields: ["tx_drops_per_s"], fn: max) |> map(fn: (r) => ({r with _field: "tx_drops_per_s_10s_max"})),
        data |> rollup(fields: ["rx_errors_per_s"], fn: max) |> map(fn: (r) => ({r with _field: "rx_errors_per_s_10s_max"})),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
