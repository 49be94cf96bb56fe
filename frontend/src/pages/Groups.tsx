import { Link } from "react-router-dom";
import { useGroups } from "../api/hooks/groups";
import { isNotFound } from "../api/client";
import { Empty, ErrorState, Loading, NotAvailable } from "../components/States";
import { formatNumber } from "../lib/format";

export function Groups() {
  const groups = useGroups();
  return (
    <section aria-labelledby="groups-title">
      <h1 id="groups-title">Consumer groups</h1>
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
            <tr><th>Group</th><th>State</th><th className="num">Members</th><th className="num">Total lag</th><th>Health</th></tr>
          </thead>
          <tbody>
            {groups.data.results.map((g) => (
              <tr key={g.group_id}>
                <td><Link to={`/groups/${encodeURIComponent(g.group_id)}`}>{g.group_id}</Link></td>
                <td>{g.state}</td>
                <td className="num">{g.members}</td>
                <td className="num">{formatNumber(g.total_lag)}</td>
                <td><span className={`badge ${g.health}`}>{g.health}</span></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
