// A consumer group's lag over the last hours (the live series): per topic and in total, each
// topic's last sample carried forward before summing, so a topic not sampled in a minute
// does not read as caught up. Says "not measured yet" until the first sample.
import { useLiveLag } from "../api/hooks/live";
import { carryForwardSum } from "../lib/series";
import { formatNumber } from "../lib/format";
import { formatTimeFull } from "../lib/time";
import { ErrorState, Loading } from "./States";
import { TimeSeriesChart, type TimeSeries } from "./TimeSeriesChart";

const STALE_MS = 5 * 60_000; // a topic not sampled for 5 minutes is not vouched for

export function GroupLagChart({ groupId }: { groupId: string }) {
  const lag = useLiveLag(groupId);
  if (lag.isPending) return <Loading what="lag history" />;
  if (lag.isError) return <ErrorState error={lag.error} what="lag history" onRetry={() => lag.refetch()} />;
  const rows = lag.data.rows.map((r) => ({ t: new Date(r.ts).getTime(), key: r.topic, value: r.offset_lag }));
  const topics = [...new Set(rows.map((r) => r.key))].sort();
  const series: TimeSeries[] = [{ name: "total", points: carryForwardSum(rows, STALE_MS) }];
  if (topics.length > 1) {
    for (const topic of topics.slice(0, 5)) {
      series.push({ name: topic, points: carryForwardSum(rows.filter((r) => r.key === topic), STALE_MS) });
    }
  }
  return (
    <div className="group-lag-chart">
      <h2>Lag over time</h2>
      <p className="muted" data-testid="lag-as-of">
        {lag.data.as_of ? `Messages behind, per minute; as of ${formatTimeFull(lag.data.as_of)}.` : "Lag history is not measured yet."}
      </p>
      <TimeSeriesChart
        label="Lag over time"
        series={series}
        step
        format={(v) => formatNumber(v)}
        empty={lag.data.as_of ? "No lag sample for this group in the last hours." : "Not measured yet: lag is sampled every minute once the brokers are up."}
      />
    </div>
  );
}
