// How much of the searched range the message browser has read: records scanned of those in
// range (so far, over the pages loaded), which partitions, and the per-search budget.
import type { BrowsePartition } from "../api/hooks/messages";
import { formatNumber } from "../lib/format";

/** "0–2", "1", "0, 2, 5" for the partitions read. */
export function partitionRange(ps: number[]): string {
  const sorted = [...ps].sort((a, b) => a - b);
  if (sorted.length === 0) return "none";
  const contiguous = sorted.every((p, i) => i === 0 || p === sorted[i - 1] + 1);
  if (sorted.length > 2 && contiguous) return `${sorted[0]}–${sorted[sorted.length - 1]}`;
  return sorted.join(", ");
}

export function ScanProgress({
  scanned,
  toScan,
  budget,
  partitions,
  done,
}: {
  scanned: number;
  toScan: number;
  budget: number;
  partitions: BrowsePartition[];
  done: boolean;
}) {
  const total = Math.max(toScan, scanned);
  const label = `partition${partitions.length === 1 ? "" : "s"} ${partitionRange(partitions.map((p) => p.partition))}`;
  const down = partitions.filter((p) => p.unavailable);
  return (
    <div className="scan-progress" data-testid="scan-progress">
      <progress aria-label="Scan progress" max={total || 1} value={done ? total || 1 : scanned} />{" "}
      <span>
        Scanned {formatNumber(scanned)} of {formatNumber(total)} records in {label}
        {done ? " (all of them)" : ""}; at most {formatNumber(budget)} per search.
      </span>
      {down.map((p) => (
        <p key={p.partition} className="state error" role="alert">
          {p.unavailable}
        </p>
      ))}
    </div>
  );
}
