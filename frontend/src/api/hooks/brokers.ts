import { useQuery } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type Broker = Schemas["ConsoleBroker"];

export function useBrokers() {
  return useQuery({
    queryKey: ["brokers"],
    queryFn: () => unwrap(client.GET("/api/v1/console/brokers")),
    refetchInterval: 5000,
  });
}
