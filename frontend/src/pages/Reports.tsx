import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { isNotFound } from "../api/client";
import { atLeast, useMe } from "../api/hooks/auth";
import {
  useCompactionReport, useLagReport, usePeaksReport, useReportRuns, useRetentionReport, useRunReport,
  useSkewReport, useThroughputReport, useUsageReport, type ReportJob,
} from "../api/hooks/reports";
import { ErrorState, FormError, Loading, NotAvailable } from "../components/States";
import { TimeSeriesChart } from "../components/TimeSeriesChart";
import { formatBytes, formatDuration, formatNumber } from "../lib/format";
import { carryForwardSum } from "../lib/series";
import { formatTimeFull } from "../lib/time";

const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2"];

/** One time series per name (group, topic, account; the first six), values of the same
 * time and name summed, for a chart on a real time axis. */
function seriesBy<T extends { ts: string }>(rows: T[], name: (r: T) => string, value: (r: T) => number) {
  const by = new Map<string, Map<number, number>>();
  for (const r of rows) {
    const points = by.get(name(r)) ?? new Map<number, number>();
    const t = new Date(r.ts).getTime();
    points.set(t, (points.get(t) ?? 0) + value(r));
    by.set(name(r), points);
  }
  return [...by.entries()].slice(0, 6).map(([n, points]) => ({
    name: n,
    points: [...points.entries()].sort((a, b) => a[0] - b[0]).map(([t, v]) => ({ t, value: v })),
  }));
}

type ReportQuery = { isPending: boolean; isError: boolean; error: unknown; data?: { rows: unknown[] }; refetch: () => unknown };

function Chart({ title, q, render }: { title: string; q: ReportQuery; render: () => React.ReactNode }) {
  return (
    <div className="panel">
      <h2>{title}</h2>
      {q.isPending ? <Loading what={title.toLowerCase()} /> : q.isError ? <ErrorState error={q.error} what={title.toLowerCase()} onRetry={() => q.refetch()} /> : !q.data?.rows.length ? (
        <p className="state empty">No rows yet: the report has not run, or there was nothing to count.</p>
      ) : render()}
    </div>
  );
}

export function Reports() {
  const me = useMe().data;
  const runs = useReportRuns();
  const run = useRunReport();
  const lag = useLagReport();
  const tput = useThroughputReport("", "hour", 24);
  const ret = useRetentionReport();
  const usage = useUsageReport("hour", 7);
  const peaks = usePeaksReport();
  const skew = useSkewReport(24);
  const compaction = useCompactionReport();

  if (isNotFound(runs.error)) {
    return (
      <section>
        <h1>Reports</h1>
        <NotAvailable feature="Reports" detail="Lag, throughput, retention and usage charts appear once the analytics jobs are deployed." />
      </section>
    );
  }
  // each group's lag: its partitions' samples (taken at different times) carried forward
  // before summing, so the sum does not drop between one partition's samples and the next's
  const lagRows = lag.data?.rows ?? [];
  const lagSeries = [...new Set(lagRows.map((r) => r.group_id))].slice(0, 6).map((g) => ({
    name: g,
    points: carryForwardSum(
      lagRows.filter((r) => r.group_id === g).map((r) => ({ t: new Date(r.ts).getTime(), key: `${r.topic}/${r.partition}`, value: r.offset_lag })),
    ),
  }));
  const tputS = seriesBy(tput.data?.rows ?? [], (r) => r.topic, (r) => r.records);
  const usageS = seriesBy(usage.data?.rows ?? [], (r) => r.service_account, (r) => r.bytes_in + r.bytes_out);
  const skewS = seriesBy(skew.data?.rows ?? [], (r) => r.topic, (r) => r.skew);
  const hot = (skew.data?.rows ?? []).filter((r) => r.hot_partition !== null).slice(-10).reverse();
  const compRows = (compaction.data?.rows ?? []).map((r) => ({
    ...r,
    name: `${r.topic}[${r.partition}]`,
    percent: r.effectiveness === null ? 0 : Number((r.effectiveness * 100).toFixed(1)),
  }));
  const retRows = Object.values(
    (ret.data?.rows ?? []).reduce<Record<string, { topic: string; bytes: number; d24: number }>>((acc, r) => {
      const x = (acc[r.topic] ??= { topic: r.topic, bytes: 0, d24: 0 });
      x.bytes += r.bytes;
      x.d24 += r.delete_24h_bytes;
      return acc;
    }, {}),
  );
  return (
    <section aria-labelledby="reports-title">
      <h1 id="reports-title">Reports</h1>
      <div className="panel">
        <h2>Runs</h2>
        {runs.isPending ? <Loading what="report runs" /> : runs.isError ? <ErrorState error={runs.error} what="report runs" onRetry={() => runs.refetch()} /> : runs.data.results.length === 0 ? (
          <p className="state empty">No report has run yet.</p>
        ) : (
          <table className="table compact" aria-label="Report runs">
            <thead><tr><th>Job</th><th>Status</th><th>Started</th><th>Took</th><th>Error</th></tr></thead>
            <tbody>
              {runs.data.results.slice(0, 10).map((r) => (
                <tr key={r.id}><td>{r.job}</td><td><span className={`badge ${r.status}`}>{r.status}</span></td><td>{formatTimeFull(r.started_at)}</td><td>{r.duration_s === null ? "—" : formatDuration(r.duration_s * 1000)}</td><td>{r.error ?? ""}</td></tr>
              ))}
            </tbody>
          </table>
        )}
        {atLeast(me?.role, "admin") && (
          <div className="actions">
            {(["lag", "throughput", "retention", "usage"] as ReportJob[]).map((j) => (
              <button key={j} type="button" disabled={run.isPending} onClick={() => run.mutate(j)}>Run {j} now</button>
            ))}
          </div>
        )}
        <FormError error={run.error} />
        {run.isSuccess && <p className="muted" role="status">The {run.variables} run is queued; the table above shows it when it starts and finishes.</p>}
      </div>
      <Chart title="Consumer lag (24 h)" q={lag} render={() => (
        <TimeSeriesChart label="Consumer lag per group" series={lagSeries} height={240} step format={(v) => formatNumber(v)} empty="No lag sample in the last 24 hours." />
      )} />
      <Chart title="Throughput, records per hour (24 h)" q={tput} render={() => (
        <TimeSeriesChart label="Records per hour per topic" series={tputS} height={240} format={(v) => formatNumber(v)} empty="No throughput in the last 24 hours." />
      )} />
      <Chart title="Peak minute per topic (24 h)" q={peaks} render={() => (
        <>
          <ResponsiveContainer width="100%" height={240}>
            <BarChart data={peaks.data!.rows} aria-label="Peak and mean records per minute"><CartesianGrid strokeDasharray="3 3" /><XAxis dataKey="topic" /><YAxis /><Tooltip /><Legend />
              <Bar dataKey="peak_records" name="records in the peak minute" fill={COLORS[2]} isAnimationActive={false} />
              <Bar dataKey="mean_records" name="mean records per busy minute" fill={COLORS[0]} isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
          <table className="table compact" aria-label="Peaks">
            <thead><tr><th>Topic</th><th>Peak minute</th><th className="num">Records</th><th className="num">Peak bytes</th><th className="num">Mean records/min</th></tr></thead>
            <tbody>
              {peaks.data!.rows.map((r) => (
                <tr key={r.topic}><td>{r.topic}</td><td>{formatTimeFull(r.peak_ts)}</td><td className="num">{formatNumber(r.peak_records)}</td><td className="num">{formatBytes(r.peak_bytes)}</td><td className="num">{formatNumber(r.mean_records, 1)}</td></tr>
              ))}
            </tbody>
          </table>
        </>
      )} />
      <Chart title="Partition skew per hour (1.0 is even; 2 or more has a hot partition)" q={skew} render={() => (
        <>
          <TimeSeriesChart label="Skew per topic" series={skewS} height={240} format={(v) => formatNumber(v, 2)} empty="No skew measured in the last 24 hours." />
          {hot.length === 0 ? <p className="muted">No hot partition in the last 24 hours.</p> : (
            <table className="table compact" aria-label="Hot partitions">
              <thead><tr><th>Hour</th><th>Topic</th><th className="num">Hot partition</th><th className="num">Share of records</th><th className="num">Skew</th></tr></thead>
              <tbody>
                {hot.map((r) => (
                  <tr key={`${r.ts}-${r.topic}`}><td>{formatTimeFull(r.ts)}</td><td>{r.topic}</td><td className="num">{r.hot_partition}</td><td className="num">{formatNumber(r.max_share * 100, 1)} %</td><td className="num">{formatNumber(r.skew, 2)}</td></tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )} />
      <Chart title="Compaction effectiveness (distinct keys / records; 100 % is fully compacted)" q={compaction} render={() => (
        <>
          <ResponsiveContainer width="100%" height={240}>
            <BarChart data={compRows} aria-label="Compaction effectiveness"><CartesianGrid strokeDasharray="3 3" /><XAxis dataKey="name" /><YAxis domain={[0, 100]} unit=" %" /><Tooltip /><Legend />
              <Bar dataKey="percent" name="effectiveness %" fill={COLORS[1]} isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
          <table className="table compact" aria-label="Compaction">
            <thead><tr><th>Partition</th><th className="num">Records</th><th className="num">Distinct keys</th><th className="num">Tombstones</th><th className="num">Keyless</th></tr></thead>
            <tbody>
              {compRows.map((r) => (
                <tr key={r.name}><td>{r.name}</td><td className="num">{formatNumber(r.records)}</td><td className="num">{formatNumber(r.distinct_keys)}</td><td className="num">{formatNumber(r.tombstones)}</td><td className="num">{formatNumber(r.keyless)}</td></tr>
              ))}
            </tbody>
          </table>
        </>
      )} />
      <Chart title="Retention: stored and deleted within 24 h" q={ret} render={() => (
        <ResponsiveContainer width="100%" height={240}>
          <BarChart data={retRows}><CartesianGrid strokeDasharray="3 3" /><XAxis dataKey="topic" /><YAxis tickFormatter={(v) => formatBytes(v)} width={80} /><Tooltip formatter={(v) => formatBytes(Number(v))} /><Legend />
            <Bar dataKey="bytes" name="stored" fill={COLORS[0]} isAnimationActive={false} />
            <Bar dataKey="d24" name="deleted within 24 h" fill={COLORS[2]} isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      )} />
      <Chart title="Usage: bytes in + out per service account (7 days)" q={usage} render={() => (
        <TimeSeriesChart label="Bytes in and out per service account" series={usageS} height={240} format={(v) => formatBytes(v)} empty="No usage in the last 7 days." />
      )} />
    </section>
  );
}
