import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "../client";

export function useConsolePolicy() {
  return useQuery({
    queryKey: ["console-policy"],
    queryFn: () => unwrap(client.GET("/api/v1/console/policy")),
  });
}

export function useUpdateConsolePolicy() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (allow_export: boolean) =>
      unwrap(client.PATCH("/api/v1/console/policy", { body: { allow_export } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["console-policy"] }),
  });
}
