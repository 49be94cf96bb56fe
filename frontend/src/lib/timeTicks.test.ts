import { describe, expect, it } from "vitest";
import { timeScale, timeTicks } from "./time";

const M = 60_000;
const H = 60 * M;
const base = Date.UTC(2025, 2, 4, 10, 0, 0);

describe("timeTicks", () => {
  it("puts ticks at round real times, not at the samples", () => {
    // samples at 10:03:17 and 11:58:02: ticks every 30 minutes on the half hour
    expect(timeTicks(base + 3 * M + 17_000, base + 118 * M + 2_000)).toEqual([
      base + 30 * M, base + 60 * M, base + 90 * M,
    ]);
  });

  it("picks the smallest step that keeps at most maxTicks", () => {
    // 10:00 to 10:00 next day: every 6 hours at 12:00, 18:00, 00:00, 06:00 (UTC)
    expect(timeTicks(base, base + 24 * H, 6)).toEqual([2, 8, 14, 20].map((h) => base + h * H));
    expect(timeTicks(base, base + 50_000, 6)).toEqual([0, 10, 20, 30, 40, 50].map((s) => base + s * 1000));
  });

  it("copes with an empty or single-instant span", () => {
    expect(timeTicks(base, base)).toEqual([base]);
    expect(timeTicks(NaN, NaN)).toEqual([]);
  });
});

describe("timeScale", () => {
  it("gives a numeric axis linear in time over the data with its ticks and local labels", () => {
    const ax = timeScale([base + 5 * M, base, base + 20 * M], { locale: "en-GB", timeZone: "UTC" });
    expect(ax.xAxis.type).toBe("number");
    expect(ax.xAxis.scale).toBe("linear");
    expect(ax.xAxis.domain).toEqual([base, base + 20 * M]);
    expect(ax.xAxis.ticks).toEqual([0, 5, 10, 15, 20].map((m) => base + m * M));
    expect(ax.xAxis.tickFormatter(base + 5 * M)).toBe("10:05");
    expect(ax.label(base)).toContain("10:00:00");
  });
});
