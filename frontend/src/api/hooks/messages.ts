import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type Browse = Schemas["ConsoleBrowse"];
export type BrowsePartition = Schemas["ConsoleBrowsePartition"];
export type ConsoleRecord = Schemas["ConsoleRecord"];
export type ProduceInput = Schemas["ConsoleMessagesInputRequest"];

export interface BrowseParams {
  partition?: number;
  start: "earliest" | "latest" | "offset" | "timestamp";
  offset?: number;
  timestamp?: number;
  limit?: number;
  key?: string;
  header_name?: string;
  header_value?: string;
  json_path?: string;
  json_value?: string;
  scan_budget?: number;
  cursor?: string;
}

function clean(p: BrowseParams): BrowseParams {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) if (v !== undefined && v !== "") out[k] = v;
  return out as unknown as BrowseParams;
}

/** The message browser: runs when `params` is set (the user pressed Search). */
export function useBrowse(topic: string, params: BrowseParams | null) {
  return useQuery({
    queryKey: ["messages", topic, params],
    enabled: params !== null,
    queryFn: () =>
      unwrap(
        client.GET("/api/v1/console/topics/{name}/messages", {
          params: { path: { name: topic }, query: clean(params as BrowseParams) },
        }),
      ),
    retry: false,
  });
}

/** A download URL for the same browse (the server checks the export policy). */
export function exportUrl(topic: string, params: BrowseParams, format: "json" | "csv"): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(clean(params))) q.set(k, String(v));
  q.set("export", format);
  return `/api/v1/console/topics/${encodeURIComponent(topic)}/messages?${q}`;
}

export function useProduce(topic: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: ProduceInput) =>
      unwrap(
        client.POST("/api/v1/console/topics/{name}/messages", {
          params: { path: { name: topic } },
          body,
        }),
      ),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ["messages", topic] });
      qc.invalidateQueries({ queryKey: ["partitions"] });
    },
  });
}
