import { useState } from "react";
import { useApiKeys, useCreateApiKey, useRevokeApiKey, type CreatedApiKey } from "../../api/hooks/apiKeys";
import { useServiceAccounts } from "../../api/hooks/serviceAccounts";
import { ConfirmDialog } from "../../components/ConfirmDialog";
import { Field } from "../../components/Field";
import { Empty, ErrorState, FormError, Loading, fieldErrors } from "../../components/States";
import { formatTime } from "../../lib/format";
import { AdminOnly } from "./AdminOnly";

export function ApiKeys() {
  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">API keys</h1>
      <AdminOnly><Body /></AdminOnly>
    </section>
  );
}

/** The new key's secret, shown once: it is kept only in this component's state. */
function NewSecret({ created, onDone }: { created: CreatedApiKey; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div className="panel secret" role="alert">
      <h2>Copy the key now</h2>
      <p>This is the only time the secret is shown. Store it in your secret manager.</p>
      <pre data-testid="new-key">{created.key}</pre>
      <div className="actions">
        <button type="button" className="primary" onClick={() => navigator.clipboard?.writeText(created.key).then(() => setCopied(true), () => setCopied(false))}>
          {copied ? "Copied" : "Copy"}
        </button>
        <button type="button" onClick={onDone}>I have stored it</button>
      </div>
    </div>
  );
}

function Body() {
  const keys = useApiKeys();
  const accounts = useServiceAccounts();
  const create = useCreateApiKey();
  const revoke = useRevokeApiKey();
  const [sa, setSa] = useState("");
  const [description, setDescription] = useState("");
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [revoking, setRevoking] = useState<string | null>(null);
  return (
    <>
      {created && <NewSecret created={created} onDone={() => setCreated(null)} />}
      <form className="form inline" aria-label="New API key" onSubmit={(e) => { e.preventDefault(); create.mutate({ service_account_id: sa, description }, { onSuccess: (k) => { setCreated(k); setDescription(""); } }); }}>
        <Field label="Service account" errors={fieldErrors(create.error, "service_account_id")}>
          {(a) => (
            <select {...a} value={sa} onChange={(e) => setSa(e.target.value)} required>
              <option value="">Choose…</option>
              {(accounts.data ?? []).map((s) => <option key={s.id} value={s.id}>{s.name} ({s.role})</option>)}
            </select>
          )}
        </Field>
        <Field label="Description">{(a) => <input {...a} value={description} onChange={(e) => setDescription(e.target.value)} />}</Field>
        <button type="submit" className="primary" disabled={create.isPending || !sa}>Create key</button>
      </form>
      <FormError error={create.error} />
      {keys.isPending ? <Loading what="API keys" /> : keys.isError ? <ErrorState error={keys.error} what="API keys" onRetry={() => keys.refetch()} /> : keys.data.length === 0 ? (
        <Empty>No API keys yet.</Empty>
      ) : (
        <table className="table" aria-label="API keys">
          <thead><tr><th>Key</th><th>Service account</th><th>Description</th><th>Created</th><th title="any use on the brokers or the API, to the minute">Last used</th><th>Status</th><th><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {keys.data.map((k) => (
              <tr key={k.key_id}>
                <td><code>{k.prefix}…</code></td>
                <td>{k.service_account}</td>
                <td>{k.description}</td>
                <td>{formatTime(k.created_at)}</td>
                <td>{formatTime(k.last_used_at)}</td>
                <td>{k.revoked_at ? `revoked ${formatTime(k.revoked_at)}` : "active"}</td>
                <td>{!k.revoked_at && <button type="button" className="small danger" onClick={() => setRevoking(k.key_id)}>Revoke</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <FormError error={revoke.error} />
      {revoking && (
        <ConfirmDialog title="Revoke this key?" body="Clients using it are refused at once and its open streams close." confirmLabel="Revoke" busy={revoke.isPending}
          onCancel={() => setRevoking(null)} onConfirm={() => revoke.mutate(revoking, { onSuccess: () => setRevoking(null) })} />
      )}
    </>
  );
}
