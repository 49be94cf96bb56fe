// Reports from the analytics API contract (docs/console.md); a 404 means not available yet.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, requestJson, unwrap, type Schemas } from "../client";

export type ReportJob = "lag" | "throughput" | "retention" | "usage";
export interface ReportRun {
  id: string;
  job: ReportJob;
  status: "queued" | "running" | "succeeded" | "failed";
  started_at: string | null;
  finished_at: string | null;
  duration_s: number | null;
  error: string | null;
}
export interface LagRow { ts: string; group_id: string; topic: string; partition: number; offset_lag: number; time_lag_ms: number | null; status: string }
export interface ThroughputRow { ts: string; topic: string; partition: number; records: number; bytes: number }
export interface RetentionRow {
  topic: string; partition: number; bytes: number; segments: number; oldest_ts: string | null;
  delete_1h_bytes: number; delete_6h_bytes: number; delete_24h_bytes: number;
}
export interface UsageRow {
  ts: string; service_account: string; topic: string; bytes_in: number; bytes_out: number;
  storage_gb_hours: number; requests: number; throttle_ms: number;
}

function report<T>(path: string, key: unknown[]) {
  return {
    queryKey: ["reports", ...key],
    queryFn: () => requestJson<{ rows: T[] }>("GET", path),
    retry: false,
  } as const;
}

export function useReportRuns() {
  return useQuery({
    queryKey: ["reports", "runs"],
    queryFn: () => requestJson<{ results: ReportRun[] }>("GET", "/api/v1/reports/runs/"),
    retry: false,
    refetchInterval: 10_000,
  });
}

export function useLagReport(group = "", hours = 24) {
  const q = new URLSearchParams({ hours: String(hours) });
  if (group) q.set("group", group);
  return useQuery(report<LagRow>(`/api/v1/reports/lag/?${q}`, ["lag", group, hours]));
}

export function useThroughputReport(topic = "", granularity: "minute" | "hour" = "minute", hours = 24) {
  const q = new URLSearchParams({ granularity, hours: String(hours) });
  if (topic) q.set("topic", topic);
  return useQuery(report<ThroughputRow>(`/api/v1/reports/throughput/?${q}`, ["throughput", topic, granularity, hours]));
}

export function useRetentionReport() {
  return useQuery(report<RetentionRow>("/api/v1/reports/retention/", ["retention"]));
}

export function useUsageReport(granularity: "hour" | "day" = "hour", days = 7) {
  const q = new URLSearchParams({ granularity, days: String(days) });
  return useQuery(report<UsageRow>(`/api/v1/reports/usage/?${q}`, ["usage", granularity, days]));
}

export function useRunReport() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (job: ReportJob) => requestJson<unknown>("POST", "/api/v1/reports/runs/", { job }),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["reports", "runs"] }),
  });
}

// Peaks, skew and compaction effectiveness: typed from the generated schema.
export type PeakRow = Schemas["PeaksReportRow"];
export type SkewRow = Schemas["SkewReportRow"];
export type CompactionRow = Schemas["CompactionReportRow"];

export function usePeaksReport() {
  return useQuery({
    queryKey: ["reports", "peaks"],
    queryFn: () => unwrap(client.GET("/api/v1/reports/peaks/")),
    retry: false,
  });
}

export function useSkewReport(hours = 24) {
  return useQuery({
    queryKey: ["reports", "skew", hours],
    queryFn: () => unwrap(client.GET("/api/v1/reports/skew/", { params: { query: { hours } } })),
    retry: false,
  });
}

export function useCompactionReport() {
  return useQuery({
    queryKey: ["reports", "compaction"],
    queryFn: () => unwrap(client.GET("/api/v1/reports/compaction/")),
    retry: false,
  });
}
