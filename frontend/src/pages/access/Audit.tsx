import { useState } from "react";
import { useAudit } from "../../api/hooks/audit";
import { Empty, ErrorState, Loading } from "../../components/States";
import { formatTime } from "../../lib/format";
import { AdminOnly } from "./AdminOnly";

const PAGE = 50;

export function Audit() {
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit log</h1>
      <AdminOnly><Body /></AdminOnly>
    </section>
  );
}

function Body() {
  const [action, setAction] = useState("");
  const [objectType, setObjectType] = useState("");
  const [offset, setOffset] = useState(0);
  const audit = useAudit({ action, object_type: objectType, limit: PAGE, offset });
  const [open, setOpen] = useState<number | null>(null);
  return (
    <>
      <div className="toolbar">
        <label>Action <input value={action} onChange={(e) => { setAction(e.target.value); setOffset(0); }} placeholder="e.g. topic.create" /></label>
        <label>Object type <input value={objectType} onChange={(e) => { setObjectType(e.target.value); setOffset(0); }} placeholder="e.g. api_key" /></label>
      </div>
      {audit.isPending ? <Loading what="the audit log" /> : audit.isError ? <ErrorState error={audit.error} what="the audit log" onRetry={() => audit.refetch()} /> : audit.data.results.length === 0 ? (
        <Empty>No audit events match.</Empty>
      ) : (
        <>
          <table className="table" aria-label="Audit events">
            <thead><tr><th>When</th><th>Who</th><th>Action</th><th>Object</th><th>From</th></tr></thead>
            <tbody>
              {audit.data.results.map((ev) => (
                <tr key={ev.id} className="clickable" tabIndex={0} onClick={() => setOpen(open === ev.id ? null : ev.id)} aria-expanded={open === ev.id} onKeyDown={(e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); setOpen(open === ev.id ? null : ev.id); } }}>
                  <td>{formatTime(ev.created_at)}</td>
                  <td>{ev.actor}</td>
                  <td><code>{ev.action}</code></td>
                  <td>
                    {ev.object_type} <code>{ev.object_id}</code>
                    {open === ev.id && <pre className="payload">{JSON.stringify({ before: ev.before, after: ev.after }, null, 2)}</pre>}
                  </td>
                  <td>{ev.ip ?? "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <div className="actions">
            <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>Newer</button>
            <span>{offset + 1}–{Math.min(offset + PAGE, audit.data.count)} of {audit.data.count}</span>
            <button type="button" disabled={offset + PAGE >= audit.data.count} onClick={() => setOffset(offset + PAGE)}>Older</button>
          </div>
        </>
      )}
    </>
  );
}
