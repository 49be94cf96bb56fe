// Kafka's default partitioner: toPositive(murmur2(keyBytes)) % numPartitions (Utils.murmur2),
// so the console names the same partition for a key as a Kafka client (and the server) would.

export function murmur2(data: Uint8Array): number {
  const length = data.length;
  const m = 0x5bd1e995;
  const r = 24;
  let h = (0x9747b28c ^ length) | 0;
  const length4 = length >> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k =
      (data[i4] & 0xff) |
      ((data[i4 + 1] & 0xff) << 8) |
      ((data[i4 + 2] & 0xff) << 16) |
      ((data[i4 + 3] & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> r;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const tail = length & ~3;
  switch (length % 4) {
    case 3:
      h ^= (data[tail + 2] & 0xff) << 16;
    // falls through
    case 2:
      h ^= (data[tail + 1] & 0xff) << 8;
    // falls through
    case 1:
      h ^= data[tail] & 0xff;
      h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

export function partitionForKey(key: string, partitions: number): number {
  const bytes = new TextEncoder().encode(key);
  return (murmur2(bytes) & 0x7fffffff) % partitions;
}
