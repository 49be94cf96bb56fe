// The live series (/api/v1/reports/live/...): per-minute throughput and lag over the last
// hours, kept by the live analytics job or the control plane's sampler, so charts have
// history when they open. Refetched every minute (a new minute row at most that often).
import { useQuery } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type LiveThroughput = Schemas["LiveThroughputReport"];
export type LiveLag = Schemas["LiveLagReport"];

export function useLiveThroughput(topic = "") {
  return useQuery({
    queryKey: ["live", "throughput", topic],
    queryFn: () =>
      unwrap(client.GET("/api/v1/reports/live/throughput/", { params: { query: topic ? { topic } : {} } })),
    retry: false,
    refetchInterval: 60_000,
  });
}

export function useLiveLag(group = "") {
  return useQuery({
    queryKey: ["live", "lag", group],
    queryFn: () => unwrap(client.GET("/api/v1/reports/live/lag/", { params: { query: group ? { group } : {} } })),
    retry: false,
    refetchInterval: 60_000,
  });
}
