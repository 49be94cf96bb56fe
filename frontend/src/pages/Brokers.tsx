import { useBrokers } from "../api/hooks/brokers";
import { Empty, ErrorState, Loading } from "../components/States";
import { formatTime } from "../lib/format";

export function Brokers() {
  const brokers = useBrokers();
  return (
    <section aria-labelledby="brokers-title">
      <h1 id="brokers-title">Brokers</h1>
      {brokers.isPending ? <Loading what="brokers" /> : brokers.isError ? (
        <ErrorState error={brokers.error} what="brokers" onRetry={() => brokers.refetch()} />
      ) : brokers.data.length === 0 ? (
        <Empty>No broker has registered yet. Start one with <code>python -m brokernodes --control-plane URL</code>.</Empty>
      ) : (
        <table className="table" aria-label="Brokers">
          <thead><tr><th className="num">Id</th><th>Address</th><th>Status</th><th className="num">Leads (your partitions)</th><th>Last heartbeat</th><th className="num">Metadata version</th></tr></thead>
          <tbody>
            {brokers.data.map((b) => (
              <tr key={b.broker_id}>
                <td className="num">{b.broker_id}</td>
                <td><code>{b.url}</code></td>
                <td><span className={`badge ${b.live ? "OK" : "ERR"}`}>{b.live ? "up" : "down"}</span></td>
                <td className="num">{b.leader_partitions}</td>
                <td>{formatTime(b.last_heartbeat_at)}</td>
                <td className="num">{b.metadata_version}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
