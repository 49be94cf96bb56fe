import type { PartitionState } from "../api/hooks/partitions";
import { formatDuration, formatNumber, formatTime } from "../lib/format";

/** A topic's open transactions, longest open first: what holds read_committed readers back
 * at a partition's last stable offset until the transaction commits, aborts or times out. */
export function OpenTransactions({ partitions }: { partitions: PartitionState[] }) {
  const rows = partitions
    .flatMap((p) => p.open_transactions.map((t) => ({ ...t, partition: p.partition })))
    .sort((a, b) => (b.open_ms ?? -1) - (a.open_ms ?? -1) || a.partition - b.partition);
  if (!rows.length) {
    return <p className="muted" data-testid="no-open-transactions">No transaction is open on this topic.</p>;
  }
  return (
    <table className="table" aria-label="Open transactions">
      <thead>
        <tr>
          <th className="num">Partition</th><th className="num">Producer id</th><th className="num">Epoch</th>
          <th className="num">First offset</th><th>Started</th><th className="num">Open for</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((t) => (
          <tr key={`${t.partition}-${t.producer_id}`}>
            <td className="num">{t.partition}</td>
            <td className="num">{t.producer_id}</td>
            <td className="num">{t.producer_epoch}</td>
            <td className="num">{formatNumber(t.first_offset)}</td>
            <td>{formatTime(t.started_ms)}</td>
            <td className="num">{formatDuration(t.open_ms)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
