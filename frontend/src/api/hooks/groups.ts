// Consumer groups over the generated client (schema.d.ts). A 404 from the list means the groups
// API is not deployed on this control plane, and the pages say so.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type GroupHealth = Schemas["HealthEnum"];
export type GroupState = Schemas["GroupStateEnum"];
export type GroupType = Schemas["GroupTypeEnum"];
export type GroupSummary = Schemas["GroupSummary"];
export type GroupMember = Schemas["Member"];
export type GroupOffset = Schemas["PartitionLag"];
export type GroupDetail = Schemas["GroupDetailOutput"];
export type ResetStrategy = Schemas["StrategyEnum"];
export type ResetRequest = Schemas["ResetInputRequest"];
export type ResetPlan = Schemas["ResetOutput"];

export function useGroups() {
  return useQuery({
    queryKey: ["groups"],
    queryFn: () => unwrap(client.GET("/api/v1/groups/")),
    refetchInterval: 5000,
    retry: false,
  });
}

export function useGroup(groupId: string) {
  return useQuery({
    queryKey: ["groups", groupId],
    queryFn: () =>
      unwrap(client.GET("/api/v1/groups/{group_id}/", { params: { path: { group_id: groupId } } })),
    refetchInterval: 5000,
    retry: false,
  });
}

export function useResetOffsets(groupId: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: ResetRequest) =>
      unwrap(
        client.POST("/api/v1/groups/{group_id}/reset-offsets", {
          params: { path: { group_id: groupId } },
          body,
        }),
      ),
    onSuccess: (r) => {
      if (r.applied) qc.invalidateQueries({ queryKey: ["groups"] });
    },
  });
}

export function useUndoReset(groupId: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (resetId: string) =>
      unwrap(
        client.POST("/api/v1/groups/{group_id}/reset-offsets/{reset_id}/undo", {
          params: { path: { group_id: groupId, reset_id: resetId } },
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["groups"] }),
  });
}

export function useDeleteGroup() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (groupId: string) =>
      unwrap(client.DELETE("/api/v1/groups/{group_id}/", { params: { path: { group_id: groupId } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["groups"] }),
  });
}
