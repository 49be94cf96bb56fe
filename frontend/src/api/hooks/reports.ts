// Reports from the analytics API, over the generated client (schema.d.ts). A 404 from the runs
// list means the analytics API is not deployed on this control plane; the page says so.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type ReportJob = Schemas["JobEnum"];
export type ReportRun = Schemas["RunOutput"];
export type ThroughputRow = Schemas["ThroughputReportRow"];
export type RetentionRow = Schemas["RetentionReportRow"];
export type UsageRow = Schemas["UsageReportRow"];
export type PeakRow = Schemas["PeaksReportRow"];
export type SkewRow = Schemas["SkewReportRow"];
export type CompactionRow = Schemas["CompactionReportRow"];

export type LagRow = Schemas["LagReportRow"];
export type LagCurrent = Schemas["LagReportCurrent"];

export function useReportRuns() {
  return useQuery({
    queryKey: ["reports", "runs"],
    queryFn: () => unwrap(client.GET("/api/v1/reports/runs/")),
    retry: false,
    refetchInterval: 10_000,
  });
}

export function useLagReport(group = "", hours = 24) {
  return useQuery({
    queryKey: ["reports", "lag", group, hours],
    queryFn: () => {
      const query = group ? { group, hours } : { hours };
      return unwrap(client.GET("/api/v1/reports/lag/", { params: { query } }));
    },
    retry: false,
  });
}

export function useThroughputReport(topic = "", granularity: "minute" | "hour" = "minute", hours = 24) {
  return useQuery({
    queryKey: ["reports", "throughput", topic, granularity, hours],
    queryFn: () => {
      const query = topic ? { topic, granularity, hours } : { granularity, hours };
      return unwrap(client.GET("/api/v1/reports/throughput/", { params: { query } }));
    },
    retry: false,
  });
}

export function useRetentionReport() {
  return useQuery({
    queryKey: ["reports", "retention"],
    queryFn: () => unwrap(client.GET("/api/v1/reports/retention/")),
    retry: false,
  });
}

export function useUsageReport(granularity: "hour" | "day" = "hour", days = 7) {
  return useQuery({
    queryKey: ["reports", "usage", granularity, days],
    queryFn: () => unwrap(client.GET("/api/v1/reports/usage/", { params: { query: { granularity, days } } })),
    retry: false,
  });
}

export function useRunReport() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (job: ReportJob) =>
      unwrap(client.POST("/api/v1/reports/runs/", { body: { job, scope: "organisation" } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["reports", "runs"] }),
  });
}

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
