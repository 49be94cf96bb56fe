// Consumer groups, typed from the groups API contract (docs/console.md). Called through the
// untyped helper so the console keeps building whether or not that API is in the schema yet;
// a 404 from the list means "not available on this control plane", and pages say so.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { requestJson } from "../client";

export type GroupHealth = "OK" | "WARN" | "ERR" | "STALL" | "STOP" | "EMPTY";
export interface GroupSummary {
  group_id: string;
  state: string;
  members: number;
  total_lag: number;
  health: GroupHealth;
}
export interface GroupMember {
  member_id: string;
  client_id: string;
  instance_id: string | null;
  assignments: { topic: string; partition: number }[];
}
export interface GroupOffset {
  topic: string;
  partition: number;
  committed_offset: number | null;
  log_end_offset: number | null;
  lag: number | null;
  time_lag_ms: number | null;
}
export interface GroupDetail {
  group_id: string;
  state: string;
  coordinator: number | null;
  members: GroupMember[];
  offsets: GroupOffset[];
}
export type ResetStrategy = "earliest" | "latest" | "offset" | "datetime" | "shift-by" | "by-duration";
export interface ResetRequest {
  topic: string;
  partitions: number[] | null;
  strategy: ResetStrategy;
  value?: string | number | null;
  dry_run: boolean;
}
export interface ResetPlan {
  plan: { topic: string; partition: number; current: number | null; target: number; delta: number | null }[];
  applied: boolean;
  reset_id: string | null;
}

const enc = encodeURIComponent;

export function useGroups() {
  return useQuery({
    queryKey: ["groups"],
    queryFn: () => requestJson<{ results: GroupSummary[] }>("GET", "/api/v1/groups/"),
    refetchInterval: 5000,
    retry: false,
  });
}

export function useGroup(groupId: string) {
  return useQuery({
    queryKey: ["groups", groupId],
    queryFn: () => requestJson<GroupDetail>("GET", `/api/v1/groups/${enc(groupId)}/`),
    refetchInterval: 5000,
    retry: false,
  });
}

export function useResetOffsets(groupId: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: ResetRequest) =>
      requestJson<ResetPlan>("POST", `/api/v1/groups/${enc(groupId)}/reset-offsets`, body),
    onSuccess: (r) => {
      if (r.applied) qc.invalidateQueries({ queryKey: ["groups"] });
    },
  });
}

export function useUndoReset(groupId: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (resetId: string) =>
      requestJson<ResetPlan>(
        "POST",
        `/api/v1/groups/${enc(groupId)}/reset-offsets/${enc(resetId)}/undo`,
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["groups"] }),
  });
}

export function useDeleteGroup() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (groupId: string) => requestJson<null>("DELETE", `/api/v1/groups/${enc(groupId)}/`),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["groups"] }),
  });
}
