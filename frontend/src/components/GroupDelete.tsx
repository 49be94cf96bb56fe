import { useState } from "react";
import { useNavigate } from "react-router-dom";
import { ApiError } from "../api/client";
import { useDeleteGroup } from "../api/hooks/groups";
import { ConfirmDialog } from "./ConfirmDialog";
import { FormError } from "./States";

/**
 * Delete a consumer group and its committed offsets, as Kafka's DeleteGroups: only while it
 * has no members. The button says why it is disabled; a member that joins meanwhile makes
 * the brokers refuse (409 GROUP_NOT_EMPTY), said plainly.
 */
export function GroupDelete({ groupId, members }: { groupId: string; members: number }) {
  const del = useDeleteGroup();
  const navigate = useNavigate();
  const [asking, setAsking] = useState(false);
  const notEmpty = del.error instanceof ApiError && del.error.code === "GROUP_NOT_EMPTY";
  return (
    <div className="panel">
      <h2>Delete group</h2>
      <p className="muted" id="group-delete-help">
        {members > 0
          ? `The group has ${members} active member${members === 1 ? "" : "s"}. Stop its consumers first: only an empty group can be deleted.`
          : "Removes the group and its committed offsets. Consumers that join it later start from their auto.offset.reset."}
      </p>
      <button type="button" className="danger" disabled={members > 0 || del.isPending} aria-describedby="group-delete-help" onClick={() => setAsking(true)}>
        Delete group
      </button>
      {notEmpty ? (
        <p className="state error" role="alert">A consumer joined the group meanwhile, so it was not deleted. Stop its consumers, then delete.</p>
      ) : <FormError error={del.error} />}
      {asking && (
        <ConfirmDialog
          title={`Delete group ${groupId}?`}
          body="Its committed offsets are deleted too. This cannot be undone."
          confirmLabel="Delete group"
          typeToConfirm={groupId}
          busy={del.isPending}
          onCancel={() => setAsking(false)}
          onConfirm={() =>
            del.mutate(groupId, {
              onSuccess: () => navigate("/groups", { state: { deleted: groupId } }),
              onSettled: () => setAsking(false),
            })
          }
        />
      )}
    </div>
  );
}
