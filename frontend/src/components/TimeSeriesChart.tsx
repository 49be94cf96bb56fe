// A line chart on a real time axis: each series brings its own points (epoch ms), samples
// sit where they happened, ticks fall on round times (lib/time.ts timeScale), and a null
// value breaks the line (not measured) instead of drawing a 0.
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { Point } from "../lib/series";
import { formatNumber } from "../lib/format";
import { timeScale } from "../lib/time";

export const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2"];

export interface TimeSeries {
  name: string;
  points: Point[];
  color?: string;
}

interface Props {
  label: string; // the chart's accessible name
  series: TimeSeries[];
  empty: string; // what to say when no series has a measured point
  height?: number;
  format?: (v: number) => string;
  step?: boolean; // a sampled level held until the next sample (lag), not a rate
}

export function TimeSeriesChart({ label, series, empty, height = 200, format = (v) => formatNumber(v, 1), step = false }: Props) {
  const measured = series.reduce((n, s) => n + s.points.filter((p) => p.value !== null).length, 0);
  if (measured === 0) return <p className="muted" data-testid="chart-empty">{empty}</p>;
  const ax = timeScale(series.flatMap((s) => s.points.map((p) => p.t)));
  return (
    <div className="chart" role="figure" aria-label={label} data-points={measured}>
      <ResponsiveContainer width="100%" height={height}>
        <LineChart margin={{ top: 8, right: 16, bottom: 0, left: 0 }}>
          <CartesianGrid strokeDasharray="3 3" />
          <XAxis dataKey="t" {...ax.xAxis} />
          <YAxis tickFormatter={(v) => format(Number(v))} width={80} />
          <Tooltip labelFormatter={ax.label} formatter={(v) => (v === null || v === undefined ? "not measured" : format(Number(v)))} />
          {series.length > 1 && <Legend />}
          {series.map((s, i) => (
            <Line
              key={s.name}
              data={s.points}
              dataKey="value"
              name={s.name}
              type={step ? "stepAfter" : "linear"}
              stroke={s.color ?? COLORS[i % COLORS.length]}
              dot={s.points.length < 3}
              isAnimationActive={false}
            />
          ))}
        </LineChart>
      </ResponsiveContainer>
    </div>
  );
}
