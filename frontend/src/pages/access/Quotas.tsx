import { useState } from "react";
import { useCreateQuota, useDeleteQuota, useQuotas, useUpdateQuota, type Quota, type QuotaValues } from "../../api/hooks/quotas";
import { useServiceAccounts } from "../../api/hooks/serviceAccounts";
import { Field } from "../../components/Field";
import { Empty, ErrorState, FormError, Loading, fieldErrors } from "../../components/States";
import { formatBytes, formatNumber } from "../../lib/format";
import { AdminOnly } from "./AdminOnly";

const LIMITS: { key: keyof QuotaValues; label: string; bytes?: boolean }[] = [
  { key: "produce_bytes_per_sec", label: "Produce bytes/s", bytes: true },
  { key: "fetch_bytes_per_sec", label: "Fetch bytes/s", bytes: true },
  { key: "request_rate", label: "Requests/s" },
  { key: "storage_bytes", label: "Storage", bytes: true },
  { key: "max_topics", label: "Topics" },
  { key: "max_partitions", label: "Partitions" },
  { key: "max_connections", label: "Connections" },
];

export function Quotas() {
  return (
    <section aria-labelledby="quotas-title">
      <h1 id="quotas-title">Quotas</h1>
      <p className="muted">The organisation's quota is set by Sluice staff; admins set quotas per service account. Empty: unlimited.</p>
      <AdminOnly><Body /></AdminOnly>
    </section>
  );
}

/** The organisation's current use under its limit, where the control plane measures it:
 * topics and partitions exactly, storage from the brokers ("not measured yet" when none answered). */
export function Used({ quota, limit }: { quota: Quota; limit: keyof QuotaValues }) {
  const u = quota.usage;
  if (!u) return null;
  let text: string;
  if (limit === "max_topics") text = `${formatNumber(u.topics)} used`;
  else if (limit === "max_partitions") text = `${formatNumber(u.partitions)} used`;
  else if (limit === "storage_bytes") {
    text = u.storage_bytes == null ? "not measured yet" : `${formatBytes(u.storage_bytes)} used${u.storage_partial ? " (some brokers did not answer)" : ""}`;
  } else return null;
  const cap = quota[limit];
  const value = limit === "max_topics" ? u.topics : limit === "max_partitions" ? u.partitions : u.storage_bytes;
  const full = cap != null && value != null && value >= cap;
  return <div className="muted">{text}{full && <> <span className="badge WARN">at the limit</span></>}</div>;
}

function toValues(form: Record<string, string>): QuotaValues {
  const out: Record<string, number | null> = {};
  for (const l of LIMITS) out[l.key] = form[l.key] === "" || form[l.key] === undefined ? null : Number(form[l.key]);
  return out as QuotaValues;
}

function QuotaForm({ initial, onSubmit, busy, error, submitLabel, children }: {
  initial?: Quota; onSubmit: (v: QuotaValues) => void; busy: boolean; error: unknown; submitLabel: string; children?: React.ReactNode;
}) {
  const [form, setForm] = useState<Record<string, string>>(() => Object.fromEntries(LIMITS.map((l) => [l.key, initial?.[l.key] == null ? "" : String(initial[l.key])])));
  return (
    <form className="form grid" aria-label={submitLabel} onSubmit={(e) => { e.preventDefault(); onSubmit(toValues(form)); }}>
      {children}
      {LIMITS.map((l) => (
        <Field key={l.key} label={l.label} errors={fieldErrors(error, l.key)}>
          {(a) => <input {...a} type="number" min={0} value={form[l.key]} onChange={(e) => setForm({ ...form, [l.key]: e.target.value })} placeholder="unlimited" />}
        </Field>
      ))}
      <div className="actions"><button type="submit" className="primary" disabled={busy}>{submitLabel}</button></div>
    </form>
  );
}

function Body() {
  const quotas = useQuotas();
  const accounts = useServiceAccounts();
  const create = useCreateQuota();
  const update = useUpdateQuota();
  const del = useDeleteQuota();
  const [sa, setSa] = useState("");
  const [editing, setEditing] = useState<string | null>(null);
  const name = (id: string | null) => accounts.data?.find((s) => s.id === id)?.name ?? id ?? "";
  return (
    <>
      {quotas.isPending ? <Loading what="quotas" /> : quotas.isError ? <ErrorState error={quotas.error} what="quotas" onRetry={() => quotas.refetch()} /> : quotas.data.length === 0 ? (
        <Empty>No quotas.</Empty>
      ) : (
        <table className="table" aria-label="Quotas">
          <thead><tr><th>Applies to</th>{LIMITS.map((l) => <th key={l.key} className="num">{l.label}</th>)}<th><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {quotas.data.map((q) => (
              <tr key={q.id}>
                <td>{q.scope === "organisation" ? "the organisation" : name(q.service_account_id)}</td>
                {LIMITS.map((l) => (
                  <td key={l.key} className="num">
                    {q[l.key] == null ? "unlimited" : l.bytes ? formatBytes(q[l.key] as number) : formatNumber(q[l.key] as number)}
                    <Used quota={q} limit={l.key} />
                  </td>
                ))}
                <td className="row">
                  {q.scope === "service_account" && (
                    <>
                      <button type="button" className="small" onClick={() => setEditing(editing === q.id ? null : q.id)}>Edit</button>
                      <button type="button" className="small danger" onClick={() => del.mutate(q.id)}>Delete</button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {editing && (
        <div className="panel">
          <h2>Edit quota of {name(quotas.data?.find((q) => q.id === editing)?.service_account_id ?? null)}</h2>
          <QuotaForm key={editing} initial={quotas.data?.find((q) => q.id === editing)} busy={update.isPending} error={update.error} submitLabel="Save quota"
            onSubmit={(v) => update.mutate({ id: editing, body: v }, { onSuccess: () => setEditing(null) })} />
          <FormError error={update.error} />
        </div>
      )}
      <div className="panel">
        <h2>New service-account quota</h2>
        <QuotaForm busy={create.isPending} error={create.error} submitLabel="Add quota" onSubmit={(v) => create.mutate({ ...v, service_account_id: sa })}>
          <Field label="Service account" errors={fieldErrors(create.error, "service_account_id")}>
            {(a) => (
              <select {...a} value={sa} onChange={(e) => setSa(e.target.value)} required>
                <option value="">Choose…</option>
                {(accounts.data ?? []).map((s) => <option key={s.id} value={s.id}>{s.name}</option>)}
              </select>
            )}
          </Field>
        </QuotaForm>
        <FormError error={create.error} />
      </div>
      <FormError error={del.error} />
    </>
  );
}
