import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type Quota = Schemas["QuotaOutput"];
export type QuotaValues = Schemas["PatchedQuotaValuesRequest"];

export function useQuotas() {
  return useQuery({ queryKey: ["quotas"], queryFn: () => unwrap(client.GET("/api/v1/quotas/")) });
}

export function useCreateQuota() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: Schemas["ServiceAccountQuotaInputRequest"]) =>
      unwrap(client.POST("/api/v1/quotas/", { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["quotas"] }),
  });
}

export function useUpdateQuota() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (v: { id: string; body: QuotaValues }) =>
      unwrap(
        client.PATCH("/api/v1/quotas/{quota_id}", {
          params: { path: { quota_id: v.id } },
          body: v.body,
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["quotas"] }),
  });
}

export function useDeleteQuota() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (quota_id: string) =>
      unwrap(client.DELETE("/api/v1/quotas/{quota_id}", { params: { path: { quota_id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["quotas"] }),
  });
}
