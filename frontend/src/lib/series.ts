// Time series for charts that tell the truth: sums of per-partition samples taken at
// different times, and per-minute history turned into rates with gaps where nothing was
// measured (a gap, never a 0).

export interface Sample {
  t: number; // epoch ms
  key: string; // the series summed over, e.g. "topic/partition"
  value: number | null; // null: sampled but not measured
}

export interface Point {
  t: number;
  value: number | null; // null: nothing measured at t (the line breaks)
}

/** The sum of every key's latest sample at each sample time: a partition sampled at 10:00
 * and not at 10:01 still counts its 10:00 value at 10:01 (carried forward), instead of the
 * sum dropping as if its lag were 0. A sample older than `maxAgeMs` is no longer carried (the
 * key was not sampled for too long to vouch for it); a time where no carried key is measured
 * reads null. Input order does not matter; output is sorted by time. */
export function carryForwardSum(samples: Sample[], maxAgeMs = Infinity): Point[] {
  const sorted = [...samples].sort((a, b) => a.t - b.t);
  const last = new Map<string, { t: number; value: number | null }>();
  const out: Point[] = [];
  for (let i = 0; i < sorted.length; i++) {
    const s = sorted[i];
    last.set(s.key, { t: s.t, value: s.value });
    if (i + 1 < sorted.length && sorted[i + 1].t === s.t) continue; // the same instant
    let total = 0;
    let measured = false;
    for (const v of last.values()) {
      if (v.value === null || s.t - v.t > maxAgeMs) continue;
      total += v.value;
      measured = true;
    }
    out.push({ t: s.t, value: measured ? total : null });
  }
  return out;
}

/** How far a live series is measured (the reports API's `measured_from` and `as_of`). */
export interface Measured {
  measured_from: string | null;
  as_of: string | null;
}

const MINUTE = 60_000;

/** Per-second rates from per-minute totals (`rows`: minute start and count): one point per
 * whole minute from `measured_from` to the last complete minute before `as_of` (a minute in
 * that span without a row had no traffic: 0; the minute `as_of` falls in may still grow, so
 * it is left out). Rows before `measured_from` (measured by an earlier source, e.g. the
 * sampler before the live job took over) are drawn as they are, without zeros between them.
 * Nothing when never measured. Points sit at the minute's middle. */
export function minuteRates(rows: { ts: string; value: number }[], m: Measured): Point[] {
  if (!m.measured_from || !m.as_of) return [];
  const from = Math.ceil(new Date(m.measured_from).getTime() / MINUTE) * MINUTE;
  const to = Math.floor(new Date(m.as_of).getTime() / MINUTE) * MINUTE; // exclusive
  const perMinute = new Map<number, number>();
  for (const r of rows) {
    const t = new Date(r.ts).getTime();
    perMinute.set(t, (perMinute.get(t) ?? 0) + r.value);
  }
  const earlier = [...perMinute.keys()].filter((t) => t < from).sort((a, b) => a - b);
  const out: Point[] = earlier.map((t) => ({ t: t + MINUTE / 2, value: perMinute.get(t)! / 60 }));
  for (let t = from; t < to; t += MINUTE) out.push({ t: t + MINUTE / 2, value: (perMinute.get(t) ?? 0) / 60 });
  return out;
}
