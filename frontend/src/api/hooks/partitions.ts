import { useQuery } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type PartitionStates = Schemas["ConsolePartitionStates"];
export type PartitionState = Schemas["ConsolePartitionState"];

/** Partition state with offsets from the leaders; polled, so pages can draw rates. */
export function usePartitionStates(topic?: string, refetchMs = 5000) {
  return useQuery({
    queryKey: ["partitions", topic ?? "*"],
    queryFn: () =>
      unwrap(
        client.GET("/api/v1/console/partitions", {
          params: { query: topic ? { topic } : {} },
        }),
      ),
    refetchInterval: refetchMs,
  });
}

export function messageCount(p: PartitionState): number | null {
  if (p.high_watermark === null || p.log_start_offset === null) return null;
  return p.high_watermark - p.log_start_offset;
}
