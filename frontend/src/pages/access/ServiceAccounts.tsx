import { useState } from "react";
import { ApiError } from "../../api/client";
import { useCreateServiceAccount, useDeleteServiceAccount, useServiceAccounts, useUpdateServiceAccount } from "../../api/hooks/serviceAccounts";
import { ConfirmDialog } from "../../components/ConfirmDialog";
import { Field } from "../../components/Field";
import { Empty, ErrorState, FormError, Loading, fieldErrors } from "../../components/States";
import { formatTime } from "../../lib/format";
import { AdminOnly } from "./AdminOnly";

export function ServiceAccounts() {
  return (
    <section aria-labelledby="sa-title">
      <h1 id="sa-title">Service accounts</h1>
      <AdminOnly><Body /></AdminOnly>
    </section>
  );
}

function Body() {
  const list = useServiceAccounts();
  const create = useCreateServiceAccount();
  const update = useUpdateServiceAccount();
  const del = useDeleteServiceAccount();
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [role, setRole] = useState<"member" | "read-only" | "admin">("member");
  const [deleting, setDeleting] = useState<{ id: string; name: string } | null>(null);
  return (
    <>
      <form className="form inline" aria-label="New service account" onSubmit={(e) => { e.preventDefault(); create.mutate({ name, description, role }, { onSuccess: () => { setName(""); setDescription(""); } }); }}>
        <Field label="Name" errors={fieldErrors(create.error, "name")}>{(a) => <input {...a} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
        <Field label="Description">{(a) => <input {...a} value={description} onChange={(e) => setDescription(e.target.value)} />}</Field>
        <Field label="Role" errors={fieldErrors(create.error, "role")}>
          {(a) => (
            <select {...a} value={role} onChange={(e) => setRole(e.target.value as typeof role)}>
              <option value="read-only">read-only</option><option value="member">member</option><option value="admin">admin</option>
            </select>
          )}
        </Field>
        <button type="submit" className="primary" disabled={create.isPending}>Create</button>
      </form>
      {!(create.error instanceof ApiError && Object.keys(create.error.fields).length) && <FormError error={create.error} />}
      {list.isPending ? <Loading what="service accounts" /> : list.isError ? <ErrorState error={list.error} what="service accounts" onRetry={() => list.refetch()} /> : list.data.length === 0 ? (
        <Empty>No service accounts yet. Create one, then give it an API key.</Empty>
      ) : (
        <table className="table" aria-label="Service accounts">
          <thead><tr><th>Name</th><th>Principal</th><th>Role</th><th>Status</th><th>Created</th><th><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {list.data.map((sa) => (
              <tr key={sa.id}>
                <td>{sa.name}<div className="muted">{sa.description}</div></td>
                <td><code>{sa.principal}</code></td>
                <td>{sa.role}</td>
                <td>{sa.is_active ? "active" : "deactivated"}</td>
                <td>{formatTime(sa.created_at)}</td>
                <td className="row">
                  {/* the console's own account: the API refuses too (409 PROTECTED_SERVICE_ACCOUNT) */}
                  <button type="button" className="small" disabled={!!sa.protected && sa.is_active} title={sa.protected && sa.is_active ? `Cannot be deactivated: ${sa.protected}` : undefined}
                    onClick={() => update.mutate({ id: sa.id, body: { is_active: !sa.is_active } })}>{sa.is_active ? "Deactivate" : "Activate"}</button>
                  <button type="button" className="small danger" disabled={!!sa.protected} title={sa.protected ? `Cannot be deleted: ${sa.protected}` : undefined}
                    onClick={() => setDeleting({ id: sa.id, name: sa.name })}>Delete</button>
                  {sa.protected && <div className="muted" role="note">Protected: {sa.protected}.</div>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <FormError error={update.error ?? del.error} />
      {deleting && (
        <ConfirmDialog title={`Delete ${deleting.name}?`} body="Its API keys stop working at once, and its quotas are removed." confirmLabel="Delete" typeToConfirm={deleting.name} busy={del.isPending}
          onCancel={() => setDeleting(null)} onConfirm={() => del.mutate(deleting.id, { onSuccess: () => setDeleting(null) })} />
      )}
    </>
  );
}
