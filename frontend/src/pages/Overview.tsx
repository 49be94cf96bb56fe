import { Link } from "react-router-dom";
import { useBrokers } from "../api/hooks/brokers";
import { useGroups } from "../api/hooks/groups";
import { useLiveThroughput } from "../api/hooks/live";
import { messageCount, usePartitionStates } from "../api/hooks/partitions";
import { useRetentionReport } from "../api/hooks/reports";
import { useTraffic } from "../api/hooks/traffic";
import { isNotFound } from "../api/client";
import { HealthBadge, HealthLegend } from "../components/HealthBadge";
import { ErrorState, Loading } from "../components/States";
import { TimeSeriesChart } from "../components/TimeSeriesChart";
import { formatBytes, formatNumber } from "../lib/format";
import { useByteRates, useMessageRates } from "../lib/rates";
import { minuteRates, type Point } from "../lib/series";
import { formatTimeFull } from "../lib/time";

export function Overview() {
  const brokers = useBrokers();
  const states = usePartitionStates(undefined, 3000);
  const groups = useGroups();
  const retention = useRetentionReport();
  const rates = useMessageRates(states.data);
  const latest = rates[rates.length - 1];
  const traffic = useTraffic(3000);
  const byteRates = useByteRates(traffic.data);
  const bytesNow = byteRates[byteRates.length - 1];
  // history: the live series per minute (all topics), then this page's own readings
  const history = useLiveThroughput();
  const hist = history.data;
  const measured = { measured_from: hist?.measured_from ?? null, as_of: hist?.as_of ?? null };
  const perMinute = (pick: (r: NonNullable<typeof hist>["rows"][number]) => number) =>
    minuteRates((hist?.rows ?? []).map((r) => ({ ts: r.ts, value: pick(r) })), measured);
  const then = (past: Point[], now: Point[]) => {
    const last = past.length ? past[past.length - 1].t : -Infinity;
    return [...past, ...now.filter((p) => p.t > last)];
  };
  const bytesIn = then(perMinute((r) => r.bytes_in), byteRates.map((r) => ({ t: r.t, value: r.bytesIn })));
  const bytesOut = then(perMinute((r) => r.bytes_out), byteRates.map((r) => ({ t: r.t, value: r.bytesOut })));
  const messagesIn = then(perMinute((r) => r.records_in), rates.map((r) => ({ t: r.t, value: r.total })));

  const partitions = states.data?.topics.flatMap((t) => t.partitions) ?? [];
  const underReplicated = partitions.filter((p) => p.under_replicated && !p.offline).length;
  const offline = partitions.filter((p) => p.offline).length;
  const live = brokers.data?.filter((b) => b.live).length ?? 0;

  const sizeByTopic: Record<string, number> = {};
  for (const r of retention.data?.rows ?? []) sizeByTopic[r.topic] = (sizeByTopic[r.topic] ?? 0) + r.bytes;
  const topics = (states.data?.topics ?? []).map((t) => ({
    name: t.name,
    rate: latest?.byTopic[t.name] ?? 0,
    bytesIn: bytesNow?.byTopic[t.name]?.bytesIn ?? 0,
    bytesOut: bytesNow?.byTopic[t.name]?.bytesOut ?? 0,
    messages: t.partitions.reduce((s, p) => s + (messageCount(p) ?? 0), 0),
    bytes: sizeByTopic[t.name],
  }));
  const byTraffic = [...topics]
    .sort((a, b) => b.bytesIn + b.bytesOut - (a.bytesIn + a.bytesOut) || b.rate - a.rate)
    .slice(0, 5);
  const bySize = [...topics]
    .sort((a, b) => (b.bytes ?? -1) - (a.bytes ?? -1) || b.messages - a.messages)
    .slice(0, 5);
  const sizesAsOf = retention.data?.as_of ?? null;
  const trouble = (groups.data?.results ?? []).filter((g) => g.health !== "OK" && g.health !== "EMPTY");

  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <div className="cards">
        <div className="card">
          <h2>Brokers up</h2>
          {brokers.isPending ? <Loading what="brokers" /> : brokers.isError ? <ErrorState error={brokers.error} what="brokers" onRetry={() => brokers.refetch()} /> : (
            <p className={"big" + (live < (brokers.data?.length ?? 0) ? " warn" : "")} data-testid="brokers-up">
              {live} / {brokers.data?.length ?? 0}
            </p>
          )}
        </div>
        <div className="card">
          <h2>Under-replicated partitions</h2>
          <p className={"big" + (underReplicated ? " warn" : "")}>{states.data ? underReplicated : "…"}</p>
        </div>
        <div className="card">
          <h2>Offline partitions</h2>
          <p className={"big" + (offline ? " bad" : "")}>{states.data ? offline : "…"}</p>
        </div>
        <div className="card">
          <h2>Bytes in / s</h2>
          <p className="big" data-testid="bytes-in-rate">{bytesNow ? `${formatBytes(Math.round(bytesNow.bytesIn))}/s` : "measuring…"}</p>
        </div>
        <div className="card">
          <h2>Bytes out / s</h2>
          <p className="big" data-testid="bytes-out-rate">{bytesNow ? `${formatBytes(Math.round(bytesNow.bytesOut))}/s` : "measuring…"}</p>
        </div>
        <div className="card">
          <h2>Messages in / s</h2>
          <p className="big">{latest ? formatNumber(latest.total, 1) : "measuring…"}</p>
        </div>
      </div>
      {states.isError && <ErrorState error={states.error} what="partition state" onRetry={() => states.refetch()} />}
      {traffic.isError && <ErrorState error={traffic.error} what="live byte counters" onRetry={() => traffic.refetch()} />}
      {traffic.data?.errors.length ? (
        <p className="state error" role="status">
          Live bytes leave out the brokers that could not be read just now: {traffic.data.errors.join("; ")}.
        </p>
      ) : null}
      <h2>Bytes in and out per second</h2>
      <p className="muted" data-testid="history-as-of">
        {measured.as_of
          ? `Per minute from ${formatTimeFull(measured.measured_from)}, then live every few seconds.`
          : history.isError ? "History could not be loaded; live readings only." : "History is not measured yet; live readings only."}
      </p>
      <TimeSeriesChart
        label="Bytes in and out per second"
        height={180}
        series={[{ name: "bytes in/s", points: bytesIn }, { name: "bytes out/s", points: bytesOut, color: "#16a34a" }]}
        format={(v) => `${formatBytes(Math.round(v))}/s`}
        empty="The chart fills in over the next few seconds."
      />
      {states.data?.errors.length ? (
        <p className="state error" role="status">
          Partition state leaves out what could not be read just now: {states.data.errors.join("; ")}.
        </p>
      ) : null}
      <h2>Messages in per second</h2>
      <TimeSeriesChart
        label="Messages in per second"
        height={180}
        series={[{ name: "messages in/s", points: messagesIn }]}
        empty="The chart fills in over the next few seconds."
      />
      <div className="two-col">
        <div>
          <h2>Top topics by traffic</h2>
          {states.isPending ? <Loading what="topics" /> : states.isError ? (
            <p className="muted">Topics could not be loaded (see above).</p>
          ) : topics.length === 0 ? (
            <p className="state empty">No topics yet. <Link to="/topics">Create one</Link>.</p>
          ) : (
            <table className="table compact">
              <thead><tr><th>Topic</th><th className="num">Bytes in/s</th><th className="num">Bytes out/s</th><th className="num">Messages/s</th></tr></thead>
              <tbody>
                {byTraffic.map((t) => (
                  <tr key={t.name}><td><Link to={`/topics/${encodeURIComponent(t.name)}`}>{t.name}</Link></td><td className="num">{formatBytes(Math.round(t.bytesIn))}</td><td className="num">{formatBytes(Math.round(t.bytesOut))}</td><td className="num">{formatNumber(t.rate, 1)}</td></tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
        <div>
          <h2>Top topics by size</h2>
          {topics.length === 0 ? null : (
            <table className="table compact" aria-label="Top topics by size">
              <thead><tr><th>Topic</th><th className="num">Size</th><th className="num">Messages</th></tr></thead>
              <tbody>
                {bySize.map((t) => (
                  <tr key={t.name}><td>{t.name}</td><td className="num">{t.bytes === undefined ? <span className="muted">not measured yet</span> : formatBytes(t.bytes)}</td><td className="num">{formatNumber(t.messages)}</td></tr>
                ))}
              </tbody>
            </table>
          )}
          <p className="muted" data-testid="sizes-as-of">
            {sizesAsOf ? `Sizes as of ${formatTimeFull(sizesAsOf)} (the retention report).` : "Sizes are not measured yet: they come from the retention report once it has run."}
          </p>
        </div>
      </div>
      <h2>Groups in trouble</h2>
      {groups.isPending ? <Loading what="consumer groups" /> : isNotFound(groups.error) ? (
        <p className="muted">Consumer groups are not available on this control plane yet.</p>
      ) : groups.isError ? <ErrorState error={groups.error} what="consumer groups" onRetry={() => groups.refetch()} /> : trouble.length === 0 ? (
        <p className="state empty">No consumer group needs attention.</p>
      ) : (
        <table className="table compact">
          <thead><tr><th>Group</th><th>Health</th><th className="num">Lag</th></tr></thead>
          <tbody>
            {trouble.map((g) => (
              <tr key={g.group_id}><td><Link to={`/groups/${encodeURIComponent(g.group_id)}`}>{g.group_id}</Link></td><td><HealthBadge health={g.health} /></td><td className="num">{formatNumber(g.total_lag)}</td></tr>
            ))}
          </tbody>
        </table>
      )}
      {trouble.length > 0 && <HealthLegend only={[...new Set(trouble.map((g) => g.health))]} />}
    </section>
  );
}
