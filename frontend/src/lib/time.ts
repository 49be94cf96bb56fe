// Times on chart axes, for people: the reader's local time, as short as the span on screen
// allows (seconds for a live minute, hours and minutes for a day, dates for weeks), and the
// full time in tooltips. One formatter for every chart, so all axes read alike.

/** Locale and time zone; unset means the browser's. Tests pin both. */
export interface TimeFormatOptions {
  locale?: string;
  timeZone?: string;
}

export type TimeValue = string | number | Date | null | undefined;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function toDate(v: TimeValue): Date | null {
  if (v === null || v === undefined || v === "") return null;
  const d = v instanceof Date ? v : new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** The Intl options for tick labels over a span of `spanMs`: the coarsest that still tells
 * neighbouring ticks apart. */
export function tickParts(spanMs: number): Intl.DateTimeFormatOptions {
  if (spanMs <= 5 * MINUTE) return { hour: "2-digit", minute: "2-digit", second: "2-digit" };
  if (spanMs <= DAY + HOUR) return { hour: "2-digit", minute: "2-digit" };
  if (spanMs <= 8 * DAY) return { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" };
  return { day: "numeric", month: "short" };
}

/** Tick labels for values spanning `spanMs`; anything that is not a time is shown as given. */
export function timeTickFormatter(spanMs: number, opts: TimeFormatOptions = {}): (v: TimeValue) => string {
  const fmt = new Intl.DateTimeFormat(opts.locale, { ...tickParts(spanMs), timeZone: opts.timeZone });
  return (v) => {
    const d = toDate(v);
    return d ? fmt.format(d) : String(v ?? "");
  };
}

/** The full local time with its zone, e.g. "Tue, 4 Mar 2025, 14:05:09 CET" (tooltips). */
export function formatTimeFull(v: TimeValue, opts: TimeFormatOptions = {}): string {
  const d = toDate(v);
  if (!d) return v === null || v === undefined || v === "" ? "—" : String(v);
  return new Intl.DateTimeFormat(opts.locale, {
    weekday: "short",
    day: "numeric",
    month: "short",
    year: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    timeZoneName: "short",
    timeZone: opts.timeZone,
  }).format(d);
}

/** The span of a chart's time values in ms (0 for fewer than two readable times). */
export function timeSpan(values: TimeValue[]): number {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    const d = toDate(v);
    if (!d) continue;
    lo = Math.min(lo, d.getTime());
    hi = Math.max(hi, d.getTime());
  }
  return hi > lo ? hi - lo : 0;
}

/** A chart's time axis: pass `tick` to XAxis tickFormatter and `label` to Tooltip
 * labelFormatter, so ticks are short and the tooltip gives the full time. */
export function timeAxis(values: TimeValue[], opts: TimeFormatOptions = {}) {
  const tick = timeTickFormatter(timeSpan(values), opts);
  return {
    tick: (v: TimeValue) => tick(v),
    label: (v: unknown) => formatTimeFull(v as TimeValue, opts),
  };
}

const SECOND = 1000;
const STEPS = [
  SECOND, 5 * SECOND, 10 * SECOND, 15 * SECOND, 30 * SECOND,
  MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
  HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY,
];

/** Ticks at round real times between `lo` and `hi` (epoch ms): the smallest step from 1 s to
 * 7 days that gives at most `maxTicks`, at multiples of it (whole minutes, hours, ...; hour
 * steps are whole in the reader's zone too, when it is a whole-hour offset from UTC). With a
 * time-scaled axis, samples sit where they happened and ticks do not pretend they are even. */
export function timeTicks(lo: number, hi: number, maxTicks = 6): number[] {
  if (!(hi > lo) || maxTicks < 1) return Number.isFinite(lo) ? [lo] : [];
  const step = STEPS.find((s) => (hi - lo) / s <= maxTicks) ?? Math.ceil((hi - lo) / maxTicks / DAY) * DAY;
  const out: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(t);
  return out;
}

/** A numeric time axis over `times` (epoch ms): recharts XAxis props (`type="number"`,
 * a linear scale over epoch ms, so positions are proportional to time; the domain, real-time
 * ticks, short labels) and the tooltip's full time. */
export function timeScale(times: number[], opts: TimeFormatOptions & { maxTicks?: number } = {}) {
  const finite = times.filter((t) => Number.isFinite(t));
  const lo = finite.length ? Math.min(...finite) : 0;
  const hi = finite.length ? Math.max(...finite) : 0;
  const fmt = timeTickFormatter(hi - lo, opts);
  return {
    xAxis: {
      type: "number" as const,
      scale: "linear" as const,
      domain: [lo, hi] as [number, number],
      ticks: timeTicks(lo, hi, opts.maxTicks ?? 6),
      tickFormatter: (v: number) => fmt(v),
    },
    label: (v: unknown) => formatTimeFull(v as TimeValue, opts),
  };
}
