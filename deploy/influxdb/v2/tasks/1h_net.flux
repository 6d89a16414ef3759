// storwatch: cq_1h_net of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "net" in storwatch/rp_1m -> 1h windows -> "net" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_net", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "net")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["rx_bytes_per_s", "tx_bytes_per_s", "rx_packets_per_s", "tx_packets_per_s", "rx_compressed_per_s", "tx_compressed_per_s", "rx_multicast_per_s", "rx_errors_per_s", "tx_errors_per_s", "rx_drops_per_s", "tx_drops_per_s", "collisions_per_s", "tx_carrier_per_s", "rx_frame_per_s", "rx_fifo_per_s", "tx_fifo_per_s", "util_pct"], fn: mean),
        data |> rollup(fields: ["rx_bytes_max_per_s", "tx_bytes_max_per_s", "util_max_pct", "util_pct_10s_max", "rx_drops_per_s_10s_max", "tx_drops_per_s_10s_max", "rx_errors_per_s_10s_max"], fn: max),
        data |> rollup(fields: ["interval_s"], fn: sum),
        data |> rollup(fields: ["speed_mbps", "operstate", "carrier_changes", "mtu"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
