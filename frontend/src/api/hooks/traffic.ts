import { useQuery } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type Traffic = Schemas["ConsoleTraffic"];

/** This organisation's byte counters per broker and topic (counters, not rates: the page
 * divides two readings, see lib/rates.ts). Polled. */
export function useTraffic(refetchMs = 3000) {
  return useQuery({
    queryKey: ["traffic"],
    queryFn: () => unwrap(client.GET("/api/v1/console/traffic")),
    refetchInterval: refetchMs,
  });
}
