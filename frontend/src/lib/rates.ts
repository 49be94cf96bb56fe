// Messages per second per topic, from successive samples of the partitions' log end offsets
// (the console polls them). Tenant-safe: the offsets come from this organisation's view.
import { useEffect, useRef, useState } from "react";
import type { PartitionStates } from "../api/hooks/partitions";

export interface RatePoint {
  t: number;
  total: number;
  byTopic: Record<string, number>;
}

function endOffsets(s: PartitionStates): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of s.topics) {
    out[t.name] = t.partitions.reduce((sum, p) => sum + (p.log_end_offset ?? 0), 0);
  }
  return out;
}

/** A rolling history (up to `keep` points) of messages/s per topic and in total. */
export function useMessageRates(states: PartitionStates | undefined, keep = 60): RatePoint[] {
  const prev = useRef<{ t: number; ends: Record<string, number> } | null>(null);
  const [points, setPoints] = useState<RatePoint[]>([]);
  useEffect(() => {
    if (!states) return;
    const t = new Date(states.ts).getTime() || Date.now();
    const ends = endOffsets(states);
    const last = prev.current;
    prev.current = { t, ends };
    if (!last || t <= last.t) return;
    const dt = (t - last.t) / 1000;
    const byTopic: Record<string, number> = {};
    let total = 0;
    for (const [name, end] of Object.entries(ends)) {
      const before = last.ends[name];
      const r = before === undefined ? 0 : Math.max(0, (end - before) / dt);
      byTopic[name] = r;
      total += r;
    }
    setPoints((ps) => [...ps.slice(-(keep - 1)), { t, total, byTopic }]);
  }, [states, keep]);
  return points;
}
