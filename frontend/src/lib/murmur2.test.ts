import { describe, expect, it } from "vitest";
import { murmur2, partitionForKey } from "./murmur2";

// Values from Kafka's Utils.murmur2 as implemented by brokernodes/client/partitioner.py
const CASES: [string, number, number, number][] = [
  ["a", -1563381124, 1, 5],
  ["ab", 316155434, 2, 0],
  ["abc", 479470107, 0, 4],
  ["abcd", -1323649548, 2, 5],
  ["order-42", 501153024, 0, 1],
  ["héllo", 614509002, 0, 2],
  ["k1", 1684045097, 2, 0],
];

describe("murmur2", () => {
  it("matches Kafka's default partitioner", () => {
    expect(murmur2(new Uint8Array())).toBe(275646681);
    for (const [key, hash, p3, p7] of CASES) {
      expect(murmur2(new TextEncoder().encode(key))).toBe(hash);
      expect(partitionForKey(key, 3)).toBe(p3);
      expect(partitionForKey(key, 7)).toBe(p7);
    }
  });
});
