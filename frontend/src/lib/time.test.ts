import { describe, expect, it } from "vitest";
import { formatTimeFull, timeAxis, timeSpan, timeTickFormatter } from "./time";

const utc = { locale: "en-GB", timeZone: "UTC" };
const berlin = { locale: "en-GB", timeZone: "Europe/Berlin" };
const HOUR = 3_600_000;

describe("chart time formatting", () => {
  it("keeps ticks short, precision picked from the span", () => {
    const ts = "2025-03-04T14:05:09Z";
    expect(timeTickFormatter(60_000, utc)(ts)).toBe("14:05:09");
    expect(timeTickFormatter(24 * HOUR, utc)(ts)).toBe("14:05");
    expect(timeTickFormatter(7 * 24 * HOUR, utc)(ts)).toBe("4 Mar, 14:05");
    expect(timeTickFormatter(30 * 24 * HOUR, utc)(ts)).toBe("4 Mar");
  });

  it("shows local time, not UTC", () => {
    expect(timeTickFormatter(24 * HOUR, berlin)("2025-03-04T14:05:09Z")).toBe("15:05");
    expect(timeTickFormatter(24 * HOUR, berlin)(Date.UTC(2025, 6, 1, 23, 30))).toBe("01:30");
  });

  it("gives the full time with its zone for tooltips", () => {
    expect(formatTimeFull("2025-03-04T14:05:09Z", utc)).toBe("Tue, 4 Mar 2025, 14:05:09 UTC");
    expect(formatTimeFull(null, utc)).toBe("—");
    expect(formatTimeFull("not a time", utc)).toBe("not a time");
  });

  it("measures the span over readable values only", () => {
    expect(timeSpan(["2025-03-04T10:00:00Z", "bad", "2025-03-04T13:00:00Z", null])).toBe(3 * HOUR);
    expect(timeSpan(["2025-03-04T10:00:00Z"])).toBe(0);
  });

  it("builds one axis from a chart's values", () => {
    const rows = ["2025-03-01T00:00:00Z", "2025-03-07T12:00:00Z"];
    const ax = timeAxis(rows, utc);
    expect(ax.tick(rows[1])).toBe("7 Mar, 12:00");
    expect(ax.label(rows[1])).toBe("Fri, 7 Mar 2025, 12:00:00 UTC");
    expect(ax.tick("topic-a")).toBe("topic-a");
  });
});
