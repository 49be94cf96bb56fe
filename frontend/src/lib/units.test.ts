import { describe, expect, it } from "vitest";
import { DURATION_UNITS, SIZE_UNITS, fromAmount, humanValue, toAmount } from "./units";

describe("config units", () => {
  it("shows durations and sizes in the largest whole unit", () => {
    expect(toAmount("604800000", DURATION_UNITS)).toEqual({ amount: "7", unit: "days" });
    expect(toAmount("90000", DURATION_UNITS)).toEqual({ amount: "90", unit: "seconds" });
    expect(toAmount("1073741824", SIZE_UNITS)).toEqual({ amount: "1", unit: "GiB" });
    expect(toAmount("1048588", SIZE_UNITS)).toEqual({ amount: "1048588", unit: "bytes" });
    expect(toAmount("9223372036854775807", DURATION_UNITS)).toEqual({ amount: "9223372036854775807", unit: "ms" });
  });

  it("turns an amount back into Kafka's value, exactly", () => {
    expect(fromAmount("2", "hours", DURATION_UNITS)).toBe("7200000");
    expect(fromAmount("1.5", "minutes", DURATION_UNITS)).toBe("90000");
    expect(fromAmount("8", "GiB", SIZE_UNITS)).toBe("8589934592");
    expect(fromAmount("9223372036854775807", "ms", DURATION_UNITS)).toBe("9223372036854775807");
    expect(fromAmount("0.5", "bytes", SIZE_UNITS)).toBeNull();
    expect(fromAmount("soon", "ms", DURATION_UNITS)).toBeNull();
  });

  it("reads values with their special meaning", () => {
    expect(humanValue("-1", "duration", { "-1": "no limit" })).toBe("no limit");
    expect(humanValue("3600000", "duration")).toBe("1 hour");
    expect(humanValue("10485760", "size")).toBe("10 MiB");
    expect(humanValue("lz4", "enum")).toBe("lz4");
  });
});
