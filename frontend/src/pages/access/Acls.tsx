import { Link } from "react-router-dom";
import { useState } from "react";
import { ApiError } from "../../api/client";
import { useAcls, useCreateAcl, useDeleteAcl, type AclInput } from "../../api/hooks/acls";
import { useServiceAccounts } from "../../api/hooks/serviceAccounts";
import { Field } from "../../components/Field";
import { Empty, ErrorState, FormError, Loading, fieldErrors } from "../../components/States";
import { AdminOnly } from "./AdminOnly";

const OPS: Record<string, string[]> = {
  TOPIC: ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"],
  GROUP: ["READ", "DESCRIBE", "DELETE", "ALL"],
  CLUSTER: ["CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "IDEMPOTENT_WRITE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"],
  TRANSACTIONAL_ID: ["WRITE", "DESCRIBE", "ALL"],
};

export function Acls() {
  return (
    <section aria-labelledby="acls-title">
      <h1 id="acls-title">ACLs</h1>
      <p className="muted">Kafka's model: deny wins; with no matching allow, access is denied. Service accounts also get their role's baseline.</p>
      <AdminOnly><Body /></AdminOnly>
    </section>
  );
}

function Body() {
  const acls = useAcls();
  const accounts = useServiceAccounts();
  const create = useCreateAcl();
  const del = useDeleteAcl();
  const [f, setF] = useState<AclInput>({
    principal: "", host: "*", resource_type: "TOPIC", resource_name: "", pattern_type: "LITERAL", operation: "READ", permission: "ALLOW",
  });
  const set = (k: keyof AclInput, v: string) => setF({ ...f, [k]: v, ...(k === "resource_type" ? { operation: OPS[v][0], resource_name: v === "CLUSTER" ? "kafka-cluster" : f.resource_name } : {}) });
  const e = (k: string) => fieldErrors(create.error, k);
  return (
    <>
      <form className="form grid" aria-label="New ACL" onSubmit={(ev) => { ev.preventDefault(); create.mutate(f, { onSuccess: () => setF({ ...f, resource_name: "" }) }); }}>
        <Field label="Principal" help="User:<service account> or User:* for everyone" errors={e("principal")}>
          {(a) => <input {...a} list="principals" value={f.principal} onChange={(ev) => set("principal", ev.target.value)} required />}
        </Field>
        <datalist id="principals">
          <option value="User:*" />
          {(accounts.data ?? []).map((s) => <option key={s.id} value={s.principal} />)}
        </datalist>
        <Field label="Resource type" errors={e("resource_type")}>
          {(a) => <select {...a} value={f.resource_type} onChange={(ev) => set("resource_type", ev.target.value)}>{Object.keys(OPS).map((t) => <option key={t}>{t}</option>)}</select>}
        </Field>
        <Field label="Pattern" errors={e("pattern_type")}>
          {(a) => <select {...a} value={f.pattern_type} onChange={(ev) => set("pattern_type", ev.target.value)}><option>LITERAL</option><option>PREFIXED</option></select>}
        </Field>
        <Field label="Resource name" help="LITERAL * matches every name" errors={e("resource_name")}>
          {(a) => <input {...a} value={f.resource_name} onChange={(ev) => set("resource_name", ev.target.value)} required />}
        </Field>
        <Field label="Operation" errors={e("operation")}>
          {(a) => <select {...a} value={f.operation} onChange={(ev) => set("operation", ev.target.value)}>{OPS[f.resource_type].map((o) => <option key={o}>{o}</option>)}</select>}
        </Field>
        <Field label="Permission" errors={e("permission")}>
          {(a) => <select {...a} value={f.permission} onChange={(ev) => set("permission", ev.target.value)}><option>ALLOW</option><option>DENY</option></select>}
        </Field>
        <Field label="Host" help="* or an IP address" errors={e("host")}>
          {(a) => <input {...a} value={f.host} onChange={(ev) => set("host", ev.target.value)} />}
        </Field>
        <div className="actions"><button type="submit" className="primary" disabled={create.isPending}>Add ACL</button></div>
      </form>
      {!(create.error instanceof ApiError && Object.keys(create.error.fields).length) && <FormError error={create.error} />}
      {acls.isPending ? <Loading what="ACLs" /> : acls.isError ? <ErrorState error={acls.error} what="ACLs" onRetry={() => acls.refetch()} /> : acls.data.length === 0 ? (
        <Empty>No ACLs: service accounts have only their role's baseline.</Empty>
      ) : (
        <table className="table" aria-label="ACLs">
          <thead><tr><th>Principal</th><th>Permission</th><th>Operation</th><th>Resource</th><th>Host</th><th><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {acls.data.map((b) => (
              <tr key={b.id}>
                <td><code>{b.principal}</code></td>
                <td><span className={`badge ${b.permission === "DENY" ? "ERR" : "OK"}`}>{b.permission}</span></td>
                <td>{b.operation}</td>
                <td>{b.resource_type} {b.pattern_type === "PREFIXED" ? "prefix" : ""} <AclResource type={b.resource_type} pattern={b.pattern_type} name={b.resource_name} /></td>
                <td>{b.host}</td>
                <td><button type="button" className="small danger" disabled={del.isPending} onClick={() => del.mutate(b.id)}>Delete</button></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <FormError error={del.error} />
    </>
  );
}

/** A literal topic or group name links to its page; prefixes, * and the cluster do not. */
function AclResource({ type, pattern, name }: { type: string; pattern: string; name: string }) {
  const page = pattern === "LITERAL" && name !== "*" ? ({ TOPIC: "topics", GROUP: "groups" } as Record<string, string>)[type] : undefined;
  return page ? <Link to={`/${page}/${encodeURIComponent(name)}`}><code>{name}</code></Link> : <code>{name}</code>;
}
