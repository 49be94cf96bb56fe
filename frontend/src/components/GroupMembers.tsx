import { Link } from "react-router-dom";
import type { GroupMember } from "../api/hooks/groups";

/** A member's assignment as "topic: 0, 1, 2", one entry per topic, partitions in order. */
export function assignmentsByTopic(m: GroupMember): [string, number[]][] {
  const by: Record<string, number[]> = {};
  for (const a of m.assignments) (by[a.topic] ??= []).push(a.partition);
  return Object.keys(by).sort().map((t) => [t, by[t].sort((x, y) => x - y)]);
}

/**
 * A group's members as Kafka's DescribeGroups gives them: member id, client id, the host
 * it connects from, its static instance id, and the partitions assigned to it by topic.
 */
export function GroupMembers({ members }: { members: GroupMember[] }) {
  if (members.length === 0) {
    return <p className="state empty">No active members: no consumer is in this group now.</p>;
  }
  const assigned = members.reduce((n, m) => n + m.assignments.length, 0);
  return (
    <>
      <table className="table compact" aria-label="Members">
        <thead><tr><th>Member</th><th>Client id</th><th>Host</th><th>Instance</th><th>Assigned partitions</th></tr></thead>
        <tbody>
          {members.map((m) => {
            const topics = assignmentsByTopic(m);
            return (
              <tr key={m.member_id}>
                <td><code>{m.member_id}</code></td>
                <td>{m.client_id || "—"}</td>
                <td>{m.client_host ?? "—"}</td>
                <td>{m.instance_id ?? "—"}</td>
                <td>
                  {topics.length === 0 ? "none" : topics.map(([t, parts], i) => (
                    <span key={t}>
                      {i > 0 && "; "}
                      <Link to={`/topics/${encodeURIComponent(t)}`}>{t}</Link>: {parts.join(", ")}
                    </span>
                  ))}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <p className="muted">{assigned} partition{assigned === 1 ? "" : "s"} assigned across {members.length} member{members.length === 1 ? "" : "s"}.</p>
    </>
  );
}
