import { Link } from "react-router-dom";
import type { GroupOffset } from "../api/hooks/groups";
import { formatDuration, formatNumber } from "../lib/format";

/** Lag and time lag per partition, worst first, with the total. */
export function LagTable({ offsets }: { offsets: GroupOffset[] }) {
  if (offsets.length === 0) {
    return <p className="state empty">This group has committed no offsets yet.</p>;
  }
  const rows = [...offsets].sort((a, b) => (b.lag ?? -1) - (a.lag ?? -1) || a.topic.localeCompare(b.topic) || a.partition - b.partition);
  const total = offsets.reduce((s, o) => s + (o.lag ?? 0), 0);
  return (
    <table className="table" aria-label="Lag per partition">
      <thead>
        <tr>
          <th>Topic</th>
          <th>Partition</th>
          <th className="num">Committed</th>
          <th className="num">Log end</th>
          <th className="num">Lag</th>
          <th className="num">Time lag</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((o) => (
          <tr key={`${o.topic}/${o.partition}`} className={o.lag && o.lag > 0 ? "lagging" : undefined}>
            <td><Link to={`/topics/${encodeURIComponent(o.topic)}`}>{o.topic}</Link></td>
            <td>{o.partition}</td>
            <td className="num">{o.committed_offset === null ? "none" : formatNumber(o.committed_offset)}</td>
            <td className="num">{formatNumber(o.log_end_offset)}</td>
            <td className="num">{formatNumber(o.lag)}</td>
            <td className="num">{formatDuration(o.time_lag_ms)}</td>
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <th colSpan={4}>Total lag</th>
          <th className="num" data-testid="total-lag">
            {formatNumber(total)}
          </th>
          <th />
        </tr>
      </tfoot>
    </table>
  );
}
