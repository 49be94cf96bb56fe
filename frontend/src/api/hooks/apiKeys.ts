import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type ApiKey = Schemas["ApiKeyOutput"];
export type CreatedApiKey = Schemas["ApiKeyCreatedOutput"];

export function useApiKeys() {
  return useQuery({
    queryKey: ["api-keys"],
    queryFn: () => unwrap(client.GET("/api/v1/api-keys/")),
  });
}

/** The answer holds the secret (`key`): shown once by the page, never cached. */
export function useCreateApiKey() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: Schemas["ApiKeyListInputRequest"]) =>
      unwrap(client.POST("/api/v1/api-keys/", { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["api-keys"] }),
  });
}

export function useRevokeApiKey() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (key_id: string) =>
      unwrap(client.DELETE("/api/v1/api-keys/{key_id}", { params: { path: { key_id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["api-keys"] }),
  });
}
