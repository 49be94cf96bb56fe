"""The broker's HTTP side: route handlers (produce, fetch, groups, REST consumers, admin,
replication and segment endpoints), the two fronts that serve them (aiohttp with
``handler``'s guarded protocol, and the lean ``fast`` front), and their glue (request
bodies, connection limits, sendfile responses, cluster-wide log offsets)."""
