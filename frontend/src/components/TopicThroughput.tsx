// A topic's throughput tab: the last hours per minute from the live series (records and
// bytes in and out per second), then the live messages/s from polled log end offsets.
// Minutes never measured are left out (not drawn as 0).
import { useLiveThroughput } from "../api/hooks/live";
import { usePartitionStates } from "../api/hooks/partitions";
import { formatBytes, formatNumber } from "../lib/format";
import { useMessageRates } from "../lib/rates";
import { minuteRates } from "../lib/series";
import { formatTimeFull } from "../lib/time";
import { ErrorState, Loading } from "./States";
import { TimeSeriesChart } from "./TimeSeriesChart";

export function TopicThroughput({ topic }: { topic: string }) {
  const states = usePartitionStates(topic, 2000);
  const rates = useMessageRates(states.data, 90);
  const live = useLiveThroughput(topic);
  const rows = live.data?.rows.filter((r) => r.topic === topic) ?? [];
  const measured = { measured_from: live.data?.measured_from ?? null, as_of: live.data?.as_of ?? null };
  const per = (pick: (r: (typeof rows)[number]) => number) => minuteRates(rows.map((r) => ({ ts: r.ts, value: pick(r) })), measured);
  const bytesPerS = (v: number) => `${formatBytes(Math.round(v))}/s`;
  return (
    <>
      <h3>Last hours, per minute</h3>
      {live.isPending ? <Loading what="throughput history" /> : live.isError ? (
        <ErrorState error={live.error} what="throughput history" onRetry={() => live.refetch()} />
      ) : (
        <>
          <p className="muted" data-testid="throughput-as-of">
            {measured.as_of
              ? `Measured from ${formatTimeFull(measured.measured_from)}; as of ${formatTimeFull(measured.as_of)}.`
              : "Throughput history is not measured yet."}
          </p>
          <TimeSeriesChart
            label="Records per second"
            series={[
              { name: "records in/s", points: per((r) => r.records_in) },
              { name: "records out/s", points: per((r) => r.records_out) },
            ]}
            empty="Not measured yet: throughput is counted per minute once the brokers are up."
          />
          <TimeSeriesChart
            label="Bytes per second"
            series={[
              { name: "bytes in/s", points: per((r) => r.bytes_in) },
              { name: "bytes out/s", points: per((r) => r.bytes_out) },
            ]}
            format={bytesPerS}
            empty="No bytes measured yet."
          />
        </>
      )}
      <h3>Live messages/s</h3>
      <TimeSeriesChart
        label="Live messages per second"
        series={[{ name: "messages/s", points: rates.map((r) => ({ t: r.t, value: Number((r.byTopic[topic] ?? 0).toFixed(2)) })) }]}
        format={(v) => formatNumber(v, 1)}
        empty="Measuring… the chart fills in over a few seconds."
      />
    </>
  );
}
