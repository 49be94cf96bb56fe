import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type ServiceAccount = Schemas["ServiceAccountOutput"];

export function useServiceAccounts(enabled = true) {
  return useQuery({
    queryKey: ["service-accounts"],
    queryFn: () => unwrap(client.GET("/api/v1/service-accounts/")),
    enabled,
  });
}

export function useCreateServiceAccount() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: Schemas["ServiceAccountListInputRequest"]) =>
      unwrap(client.POST("/api/v1/service-accounts/", { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["service-accounts"] }),
  });
}

export function useUpdateServiceAccount() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (v: { id: string; body: Schemas["PatchedServiceAccountDetailInputRequest"] }) =>
      unwrap(
        client.PATCH("/api/v1/service-accounts/{service_account_id}", {
          params: { path: { service_account_id: v.id } },
          body: v.body,
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["service-accounts"] }),
  });
}

export function useDeleteServiceAccount() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: string) =>
      unwrap(
        client.DELETE("/api/v1/service-accounts/{service_account_id}", {
          params: { path: { service_account_id: id } },
        }),
      ),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ["service-accounts"] });
      qc.invalidateQueries({ queryKey: ["api-keys"] });
    },
  });
}
