import { describe, expect, it } from "vitest";
import { carryForwardSum, minuteRates } from "./series";

const M = 60_000;

describe("carryForwardSum", () => {
  it("carries each partition's last sample forward instead of dropping to 0 between samples", () => {
    // partition 0 sampled at 0 and 2 min, partition 1 at 1 and 3 min: never at the same time
    const pts = carryForwardSum([
      { t: 0, key: "p0", value: 10 },
      { t: 1 * M, key: "p1", value: 5 },
      { t: 2 * M, key: "p0", value: 12 },
      { t: 3 * M, key: "p1", value: 7 },
    ]);
    expect(pts).toEqual([
      { t: 0, value: 10 },
      { t: M, value: 15 },
      { t: 2 * M, value: 17 },
      { t: 3 * M, value: 19 },
    ]);
  });

  it("sums samples of the same instant once, in any input order", () => {
    const pts = carryForwardSum([
      { t: M, key: "b", value: 2 },
      { t: 0, key: "a", value: 1 },
      { t: M, key: "a", value: 3 },
    ]);
    expect(pts).toEqual([{ t: 0, value: 1 }, { t: M, value: 5 }]);
  });

  it("reads null where nothing is measured, and stops carrying samples older than maxAge", () => {
    const pts = carryForwardSum(
      [
        { t: 0, key: "a", value: null },
        { t: M, key: "a", value: 4 },
        { t: 2 * M, key: "b", value: 1 },
        { t: 10 * M, key: "b", value: null },
      ],
      5 * M,
    );
    expect(pts).toEqual([
      { t: 0, value: null },
      { t: M, value: 4 },
      { t: 2 * M, value: 5 },
      { t: 10 * M, value: null }, // a is 9 minutes old, b not measured
    ]);
  });

  it("answers nothing for no samples", () => {
    expect(carryForwardSum([])).toEqual([]);
  });
});

describe("minuteRates", () => {
  const m = { measured_from: "2025-03-04T10:00:00Z", as_of: "2025-03-04T10:03:20Z" };
  const t = (min: number) => Date.UTC(2025, 2, 4, 10, min, 30);

  it("gives per-second rates for whole measured minutes, 0 for a measured minute without rows", () => {
    const rows = [
      { ts: "2025-03-04T10:00:00Z", value: 60 },
      { ts: "2025-03-04T10:00:00Z", value: 120 }, // another topic, same minute
      { ts: "2025-03-04T10:02:00Z", value: 30 },
      { ts: "2025-03-04T10:03:00Z", value: 600 }, // as_of's minute: still growing, left out
    ];
    expect(minuteRates(rows, m)).toEqual([
      { t: t(0), value: 3 },
      { t: t(1), value: 0 },
      { t: t(2), value: 0.5 },
    ]);
  });

  it("starts at the first whole minute measured and gives nothing when never measured", () => {
    expect(minuteRates([], { measured_from: "2025-03-04T10:00:40Z", as_of: "2025-03-04T10:02:05Z" })).toEqual([
      { t: t(1), value: 0 },
    ]);
    expect(minuteRates([{ ts: "2025-03-04T10:00:00Z", value: 5 }], { measured_from: null, as_of: null })).toEqual([]);
  });

  it("draws rows from before measured_from as they are, with no zeros between them", () => {
    const rows = [
      { ts: "2025-03-04T09:50:00Z", value: 60 },
      { ts: "2025-03-04T09:55:00Z", value: 120 },
    ];
    expect(minuteRates(rows, { measured_from: "2025-03-04T10:00:00Z", as_of: "2025-03-04T10:01:10Z" })).toEqual([
      { t: Date.UTC(2025, 2, 4, 9, 50, 30), value: 1 },
      { t: Date.UTC(2025, 2, 4, 9, 55, 30), value: 2 },
      { t: t(0), value: 0 },
    ]);
  });
});
