import { useBrokers, type Broker } from "../api/hooks/brokers";
import { Empty, ErrorState, Loading } from "../components/States";
import { formatBytes, formatDuration, formatNumber, formatTime } from "../lib/format";

type Info = NonNullable<Broker["info"]>;

/** What the page says where the broker could not describe itself: never a 0. */
function missing(b: Broker): string {
  return b.live ? "unreachable" : "down";
}

function status(b: Broker): { text: string; badge: string } {
  if (!b.live) return { text: "down", badge: "ERR" };
  if (!b.info) return { text: "unreachable", badge: "STALL" };
  return { text: "up", badge: "OK" };
}

function disk(info: Info): string {
  const logs = info.log_dirs.reduce((n, d) => n + (d.log_bytes ?? 0), 0);
  const free = info.log_dirs.every((d) => d.free_bytes != null) ? info.log_dirs.reduce((n, d) => n + (d.free_bytes ?? 0), 0) : null;
  return `${formatBytes(logs)} in logs, ${free == null ? "free not measured" : `${formatBytes(free)} free`}`;
}

/** The address without the scheme, when it is plain http (the full URL is the cell's title). */
function address(url: string): string {
  return url.replace(/^http:\/\//, "");
}

/** How long ago, "as of" this render (the list polls every few seconds). */
function ago(at: string): string {
  return `${formatDuration(Math.max(0, Date.now() - Date.parse(at)))} ago`;
}

// one line per broker at 1366 px: data cells do not wrap (.brokers in styles.css), headers may
function BrokerTable({ brokers }: { brokers: Broker[] }) {
  return (
    <table className="table brokers" aria-label="Brokers">
        <thead>
          <tr>
            <th className="num">Id</th><th>Address</th><th>Kafka listener</th><th>Status</th><th>Version</th><th>Uptime</th>
            <th className="num">Partitions</th><th className="num">Leaders</th><th className="num">Under-replicated</th>
            <th className="num" title="How many of your organisation's partitions this broker leads">Leads (yours)</th><th>Disk</th><th>Last heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {brokers.map((b) => {
            const s = status(b);
            return (
              <tr key={b.broker_id}>
                <td className="num">{b.broker_id}</td>
                <td title={b.url}><code>{address(b.url)}</code></td>
                <td>{b.kafka ? <code>{b.kafka}</code> : <span className="muted">none</span>}</td>
                <td><span className={`badge ${s.badge}`} title={b.info_error ?? undefined}>{s.text}</span></td>
                <td>{b.info ? b.info.version : <span className="muted">{missing(b)}</span>}</td>
                <td>{b.info ? formatDuration(Math.round(b.info.uptime_s * 1000)) : <span className="muted">{missing(b)}</span>}</td>
                <td className="num">{formatNumber(b.partitions)}</td>
                <td className="num">{formatNumber(b.leaders)}</td>
                <td className="num">{b.under_replicated > 0 ? <span className="badge ERR">{b.under_replicated}</span> : 0}</td>
                <td className="num">{b.leader_partitions}</td>
                <td>{b.info ? disk(b.info) : <span className="muted">{missing(b)}</span>}</td>
                <td title={formatTime(b.last_heartbeat_at)}>{ago(b.last_heartbeat_at)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
  );
}

function configValue(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

function BrokerDetail({ b }: { b: Broker }) {
  return (
    <section className="panel" aria-label={`Broker ${b.broker_id}`}>
      <h2>Broker {b.broker_id}</h2>
      {b.info_error && <p className="state error" role="status">Broker {b.broker_id} is {b.info_error}. Disk, version, uptime and settings are shown when it answers.</p>}
      <p>
        Hosts {formatNumber(b.partitions)} partition replicas, leads {formatNumber(b.leaders)}; {b.under_replicated} of those it leads are under-replicated,
        and it is out of the ISR of {b.out_of_isr} it hosts.
      </p>
      {b.your_under_replicated.length > 0 && (
        <p role="note">Your under-replicated partitions it leads: {b.your_under_replicated.map((p) => `${p.topic}-${p.partition}`).join(", ")}</p>
      )}
      {b.info && (
        <>
          <p className="muted">Version {b.info.version}, started {formatTime(b.info.started_at_ms)}.</p>
          <table className="table" aria-label={`Log directories of broker ${b.broker_id}`}>
            <thead><tr><th>Log directory</th><th className="num">Used by logs</th><th className="num">Free</th><th className="num">File system size</th></tr></thead>
            <tbody>
              {b.info.log_dirs.map((d) => (
                <tr key={d.path}>
                  <td><code>{d.path}</code></td>
                  <td className="num">{formatBytes(d.log_bytes)}</td>
                  <td className="num">{d.free_bytes == null ? "not measured" : formatBytes(d.free_bytes)}</td>
                  <td className="num">{d.total_bytes == null ? "not measured" : formatBytes(d.total_bytes)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <details>
            <summary>Settings of broker {b.broker_id}</summary>
            <table className="table" aria-label={`Settings of broker ${b.broker_id}`}>
              <thead><tr><th>Setting</th><th>Value</th></tr></thead>
              <tbody>
                {Object.entries(b.info.configs).sort(([a], [c]) => a.localeCompare(c)).map(([k, v]) => (
                  <tr key={k}><td><code>{k}</code></td><td><code>{configValue(v)}</code></td></tr>
                ))}
              </tbody>
            </table>
          </details>
        </>
      )}
    </section>
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
        <>
          {brokers.data.some((b) => b.kafka) && (
            <p className="muted">
              Kafka clients bootstrap from any Kafka listener below with SASL/PLAIN: the API key id as the user name, its secret as the password.
            </p>
          )}
          <p className="muted">
            Partition, leader and under-replicated counts are the whole cluster's (every organisation's); names are shown for your partitions only.
          </p>
          <BrokerTable brokers={brokers.data} />
          {brokers.data.map((b) => <BrokerDetail key={b.broker_id} b={b} />)}
        </>
      )}
    </section>
  );
}
