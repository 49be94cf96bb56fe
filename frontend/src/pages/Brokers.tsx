import { useBrokers, type Broker } from "../api/hooks/brokers";
import { Empty, ErrorState, Loading } from "../components/States";
import { formatTime } from "../lib/format";

function BrokerTable({ brokers }: { brokers: Broker[] }) {
  return (
    <>
      {brokers.some((b) => b.kafka) && (
        <p className="muted">
          Kafka clients bootstrap from any Kafka listener below with SASL/PLAIN: the API key id as the user name, its secret as the password.
        </p>
      )}
      <table className="table" aria-label="Brokers">
        <thead><tr><th className="num">Id</th><th>Address</th><th>Kafka listener</th><th>Status</th><th className="num">Leads (your partitions)</th><th>Last heartbeat</th><th className="num">Metadata version</th></tr></thead>
        <tbody>
          {brokers.map((b) => (
            <tr key={b.broker_id}>
              <td className="num">{b.broker_id}</td>
              <td><code>{b.url}</code></td>
              <td>{b.kafka ? <code>{b.kafka}</code> : <span className="muted">none</span>}</td>
              <td><span className={`badge ${b.live ? "OK" : "ERR"}`}>{b.live ? "up" : "down"}</span></td>
              <td className="num">{b.leader_partitions}</td>
              <td>{formatTime(b.last_heartbeat_at)}</td>
              <td className="num">{b.metadata_version}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

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
        <BrokerTable brokers={brokers.data} />
      )}
    </section>
  );
}
