import { useMutation, useQuery, useQueryClient, type QueryClient } from "@tanstack/react-query";
import { client, unwrap, ApiError, type Schemas } from "../client";

export type Me = Schemas["MeOutput"];
export type Role = "owner" | "admin" | "member" | "read-only";
const RANK: Record<string, number> = { "read-only": 0, member: 1, admin: 2, owner: 3 };

export function atLeast(role: string | null | undefined, required: Role): boolean {
  return (RANK[role ?? ""] ?? -1) >= RANK[required];
}

/** A new identity or organisation: keep `me`, drop every other cached answer. */
function switchTo(qc: QueryClient, me: Me | null) {
  qc.setQueryData(["me"], me);
  qc.removeQueries({ predicate: (q) => q.queryKey[0] !== "me" });
}

export function useMe() {
  return useQuery({
    queryKey: ["me"],
    queryFn: async () => {
      try {
        return await unwrap(client.GET("/api/v1/auth/me"));
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return null;
        throw e;
      }
    },
    staleTime: 30_000,
  });
}

export function useSignIn() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: async (v: { username: string; password: string }) => {
      await unwrap(client.GET("/api/v1/auth/csrf"));
      return unwrap(client.POST("/api/v1/auth/login", { body: v }));
    },
    onSuccess: (me) => switchTo(qc, me),
  });
}

export function useSignOut() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: () => unwrap(client.POST("/api/v1/auth/logout")),
    onSettled: () => switchTo(qc, null),
  });
}

export function useSwitchOrganisation() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (organisation: string) =>
      unwrap(client.POST("/api/v1/auth/organisation", { body: { organisation } })),
    onSuccess: (me) => switchTo(qc, me),
  });
}
