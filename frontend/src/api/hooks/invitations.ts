import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type MyInvitation = Schemas["MyInvitationOutput"];

/** Invitations waiting for the signed-in person's answer (auth/invitations). */
export function useMyInvitations() {
  return useQuery({
    queryKey: ["my-invitations"],
    queryFn: () => unwrap(client.GET("/api/v1/auth/invitations")),
    staleTime: 30_000,
  });
}

/** Accept (join with the offered role) or decline an invitation. */
export function useAnswerInvitation() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: async (v: { id: string; accept: boolean }) => {
      const params = { params: { path: { invitation_id: v.id } } };
      if (v.accept) {
        const me = await unwrap(client.POST("/api/v1/auth/invitations/{invitation_id}/accept", params));
        qc.setQueryData(["me"], me);
      } else {
        await unwrap(client.POST("/api/v1/auth/invitations/{invitation_id}/decline", params));
      }
    },
    onSettled: () => qc.invalidateQueries({ queryKey: ["my-invitations"] }),
  });
}
