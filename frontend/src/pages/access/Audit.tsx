import { useState } from "react";
import { useAudit } from "../../api/hooks/audit";
import { AuditChanges, AuditObject, changeSummary } from "../../components/AuditChanges";
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
          <p className="muted">Select an event to see every field it changed, before and after.</p>
          <table className="table" aria-label="Audit events">
            <thead><tr><th>When</th><th>Who</th><th>Action</th><th>Object</th><th>What changed</th><th>From</th></tr></thead>
            <tbody>
              {audit.data.results.map((ev) => (
                <tr key={ev.id} className="clickable" tabIndex={0} onClick={() => setOpen(open === ev.id ? null : ev.id)} aria-expanded={open === ev.id} onKeyDown={(e) => { if (e.target === e.currentTarget && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); setOpen(open === ev.id ? null : ev.id); } }}>
                  <td>{formatTime(ev.created_at)}</td>
                  <td>{ev.actor}</td>
                  <td><code>{ev.action}</code></td>
                  <td><AuditObject event={ev} /></td>
                  <td>
                    {changeSummary(ev.changes) || <span className="muted">—</span>}
                    {open === ev.id && <AuditChanges changes={ev.changes} />}
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
