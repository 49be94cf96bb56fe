import { Link, useLocation } from "react-router-dom";
import { useGroups, type GroupState, type GroupType } from "../api/hooks/groups";
import { isNotFound } from "../api/client";
import { HealthBadge, HealthLegend } from "../components/HealthBadge";
import { Empty, ErrorState, Loading, NotAvailable } from "../components/States";
import { formatNumber } from "../lib/format";

/** Kafka's state names as words: PREPARING_REBALANCE -> "Preparing rebalance". */
export function stateLabel(state: GroupState): string {
  const words = state.toLowerCase().replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Which of Kafka's group protocols the group runs. */
export function typeLabel(type: GroupType): string {
  return type === "classic" ? "classic" : "consumer (KIP-848)";
}

export function Groups() {
  const groups = useGroups();
  const deleted = (useLocation().state as { deleted?: string } | null)?.deleted;
  return (
    <section aria-labelledby="groups-title">
      <h1 id="groups-title">Consumer groups</h1>
      {deleted && <p role="status" className="state">Deleted group {deleted} and its committed offsets.</p>}
      {groups.isPending ? (
        <Loading what="consumer groups" />
      ) : isNotFound(groups.error) ? (
        <NotAvailable feature="Consumer groups" />
      ) : groups.isError ? (
        <ErrorState error={groups.error} what="consumer groups" onRetry={() => groups.refetch()} />
      ) : groups.data.results.length === 0 ? (
        <Empty>No consumer groups yet. A group appears here once a consumer joins it or commits offsets.</Empty>
      ) : (
        <table className="table" aria-label="Consumer groups">
          <thead>
            <tr><th>Group</th><th>Protocol</th><th>State</th><th className="num">Members</th><th className="num">Total lag</th><th>Health</th></tr>
          </thead>
          <tbody>
            {groups.data.results.map((g) => (
              <tr key={g.group_id}>
                <td><Link to={`/groups/${encodeURIComponent(g.group_id)}`}>{g.group_id}</Link></td>
                <td>{typeLabel(g.type)}</td>
                <td>{stateLabel(g.state)}</td>
                <td className="num">{g.members}</td>
                <td className="num">{formatNumber(g.total_lag)}</td>
                <td><HealthBadge health={g.health} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {groups.data?.results.length ? <HealthLegend /> : null}
    </section>
  );
}
