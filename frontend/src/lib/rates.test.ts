import { describe, expect, it } from "vitest";
import { byteRates, type ByteCounterReading } from "./rates";

const reading = (ts: string, brokers: number[], counters: [number, string, number, number][]): ByteCounterReading => ({
  ts,
  brokers,
  counters: counters.map(([broker_id, topic, bytes_in, bytes_out]) => ({ broker_id, topic, bytes_in, bytes_out })),
});

describe("byteRates", () => {
  it("divides each series' growth by the time between readings and sums", () => {
    const a = reading("2026-11-24T07:00:00Z", [1, 2], [[1, "orders", 1000, 0], [2, "orders", 500, 100]]);
    const b = reading("2026-11-24T07:00:02Z", [1, 2], [[1, "orders", 5000, 0], [2, "orders", 700, 2100], [2, "audit", 60, 0]]);
    const r = byteRates(a, b)!;
    expect(r.bytesIn).toBe((4000 + 200 + 60) / 2);
    expect(r.bytesOut).toBe(2000 / 2);
    expect(r.byTopic.orders).toEqual({ bytesIn: 2100, bytesOut: 1000 });
    expect(r.byTopic.audit).toEqual({ bytesIn: 30, bytesOut: 0 }); // a new series counts from 0
  });

  it("treats a lower counter as a restarted broker and skips a broker not read before", () => {
    const a = reading("2026-11-24T07:00:00Z", [1], [[1, "orders", 9000, 9000]]);
    const b = reading("2026-11-24T07:00:01Z", [1, 3], [[1, "orders", 400, 0], [3, "orders", 1e9, 1e9]]);
    const r = byteRates(a, b)!;
    expect(r.bytesIn).toBe(400); // since the restart, not -8600
    expect(r.bytesOut).toBe(0);
  });

  it("answers nothing for readings out of order", () => {
    const a = reading("2026-11-24T07:00:01Z", [1], []);
    expect(byteRates(a, reading("2026-11-24T07:00:01Z", [1], []))).toBeNull();
  });
});
