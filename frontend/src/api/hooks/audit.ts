import { useQuery } from "@tanstack/react-query";
import { client, unwrap } from "../client";

export interface AuditFilters {
  action?: string;
  object_type?: string;
  limit: number;
  offset: number;
}

export function useAudit(f: AuditFilters) {
  return useQuery({
    queryKey: ["audit", f],
    queryFn: () =>
      unwrap(
        client.GET("/api/v1/audit", {
          params: {
            query: {
              limit: f.limit,
              offset: f.offset,
              ...(f.action ? { action: f.action } : {}),
              ...(f.object_type ? { object_type: f.object_type } : {}),
            },
          },
        }),
      ),
  });
}
