import { Link } from "react-router-dom";
import type { Schemas } from "../api/client";

type AuditEvent = Schemas["AuditEventOutput"];
type Change = Schemas["Change"];

function show(v: unknown): string {
  if (v === null || v === undefined) return "—";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The object an audit event touched, by name, linked when the console has a page for it;
 * the id stays visible on hover (a topic's id names one incarnation of the name). */
export function AuditObject({ event }: { event: AuditEvent }) {
  const name = event.object_name;
  const label = name ?? event.object_id;
  const to =
    name && event.object_type === "topic" && event.action !== "topic.delete"
      ? `/topics/${encodeURIComponent(name)}`
      : name && event.object_type === "group" && event.action !== "group.delete"
        ? `/groups/${encodeURIComponent(name)}`
        : null;
  return (
    <span title={event.object_id ? `${event.object_type} ${event.object_id}` : undefined}>
      {event.object_type}{" "}
      {to ? <Link to={to} onClick={(e) => e.stopPropagation()}>{label}</Link> : <code>{label || "—"}</code>}
    </span>
  );
}

/** One line saying what changed: "retention.ms 3600000 → 60000", the first few fields. */
export function changeSummary(changes: Change[], max = 2): string {
  const parts = changes.slice(0, max).map((c) => `${c.field.replace(/^configs\./, "")} ${show(c.before)} → ${show(c.after)}`);
  return parts.join("; ") + (changes.length > max ? `; ${changes.length - max} more` : "");
}

/** Every changed field with its value before and after. */
export function AuditChanges({ changes }: { changes: Change[] }) {
  if (!changes.length) return <p className="muted">No field values were recorded for this event.</p>;
  return (
    <table className="table compact" aria-label="Changes">
      <thead><tr><th>Field</th><th>Before</th><th>After</th></tr></thead>
      <tbody>
        {changes.map((c) => (
          <tr key={c.field}>
            <td><code>{c.field}</code></td>
            <td className={c.before === null ? "muted" : "removed"}>{show(c.before)}</td>
            <td className={c.after === null ? "muted" : "added"}>{show(c.after)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
