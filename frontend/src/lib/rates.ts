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

// --- bytes in and out per second, from two readings of the brokers' byte counters ---------

export interface ByteCounterReading {
  ts: string;
  brokers: number[]; // the brokers whose counters were read this time
  counters: { broker_id: number; topic: string; bytes_in: number; bytes_out: number }[];
}

export interface ByteRate {
  t: number;
  bytesIn: number;
  bytesOut: number;
  byTopic: Record<string, { bytesIn: number; bytesOut: number }>;
}

/** Bytes per second between two readings, per broker and topic series, summed.
 * - A series absent from `prev` but on a broker read then too started since: all of it counts.
 * - A broker not read in `prev` (unreachable, or new) contributes nothing this time: we do
 *   not know over what time its counters grew.
 * - A counter lower than before means its broker restarted (counters start again from 0):
 *   the new value is what it counted since, as Prometheus' rate() treats a reset. */
export function byteRates(prev: ByteCounterReading, cur: ByteCounterReading): ByteRate | null {
  const t0 = new Date(prev.ts).getTime();
  const t1 = new Date(cur.ts).getTime();
  if (!(t1 > t0)) return null;
  const dt = (t1 - t0) / 1000;
  const before = new Map<string, { bytes_in: number; bytes_out: number }>();
  for (const c of prev.counters) before.set(`${c.broker_id}\u0000${c.topic}`, c);
  const readBefore = new Set(prev.brokers);
  const out: ByteRate = { t: t1, bytesIn: 0, bytesOut: 0, byTopic: {} };
  const grow = (now: number, then: number | undefined) => (then === undefined ? now : now >= then ? now - then : now);
  for (const c of cur.counters) {
    if (!readBefore.has(c.broker_id)) continue;
    const p = before.get(`${c.broker_id}\u0000${c.topic}`);
    const din = grow(c.bytes_in, p?.bytes_in) / dt;
    const dout = grow(c.bytes_out, p?.bytes_out) / dt;
    const topic = (out.byTopic[c.topic] ??= { bytesIn: 0, bytesOut: 0 });
    topic.bytesIn += din;
    topic.bytesOut += dout;
    out.bytesIn += din;
    out.bytesOut += dout;
  }
  return out;
}

/** A rolling history (up to `keep` points) of bytes in/out per second from polled counters. */
export function useByteRates(reading: ByteCounterReading | undefined, keep = 60): ByteRate[] {
  const prev = useRef<ByteCounterReading | null>(null);
  const [points, setPoints] = useState<ByteRate[]>([]);
  useEffect(() => {
    if (!reading) return;
    const last = prev.current;
    prev.current = reading;
    if (!last) return;
    const r = byteRates(last, reading);
    if (r) setPoints((ps) => [...ps.slice(-(keep - 1)), r]);
  }, [reading, keep]);
  return points;
}
