import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type Acl = Schemas["AclOutput"];
export type AclInput = Schemas["AclListInputRequest"];

export function useAcls() {
  return useQuery({ queryKey: ["acls"], queryFn: () => unwrap(client.GET("/api/v1/acls/")) });
}

export function useCreateAcl() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: AclInput) => unwrap(client.POST("/api/v1/acls/", { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["acls"] }),
  });
}

export function useDeleteAcl() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (acl_id: string) =>
      unwrap(client.DELETE("/api/v1/acls/{acl_id}", { params: { path: { acl_id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["acls"] }),
  });
}
