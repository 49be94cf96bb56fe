import { useState } from "react";
import { Link, NavLink, Route, Routes, useParams } from "react-router-dom";
import { isNotFound } from "../api/client";
import { atLeast, useMe } from "../api/hooks/auth";
import { useGroup, useGroups } from "../api/hooks/groups";
import { usePartitionStates } from "../api/hooks/partitions";
import { useRetentionReport } from "../api/hooks/reports";
import { useAddPartitions, useTopic, type TopicDetail } from "../api/hooks/topics";
import { Field } from "../components/Field";
import { OpenTransactions } from "../components/OpenTransactions";
import { TopicThroughput } from "../components/TopicThroughput";
import { TopicConfigs } from "../components/TopicConfigs";
import { Empty, ErrorState, FormError, Loading, fieldErrors } from "../components/States";
import { formatBytes, formatNumber } from "../lib/format";
import { formatTimeFull } from "../lib/time";
import { LiveTail } from "./LiveTail";
import { MessageBrowser } from "./MessageBrowser";
import { ProduceForm } from "./ProduceForm";

function Partitions({ topic }: { topic: TopicDetail }) {
  const states = usePartitionStates(topic.name, 3000);
  const retention = useRetentionReport();
  const me = useMe().data;
  const add = useAddPartitions(topic.name);
  const [count, setCount] = useState(String(topic.partitions + 1));
  const size: Record<number, number> = {};
  for (const r of retention.data?.rows ?? []) if (r.topic === topic.name) size[r.partition] = r.bytes;
  const parts = states.data?.topics[0]?.partitions ?? [];
  return (
    <>
      {states.isPending ? <Loading what="partitions" /> : states.isError ? <ErrorState error={states.error} what="partitions" onRetry={() => states.refetch()} /> : (
        <table className="table" aria-label="Partitions">
          <thead>
            <tr>
              <th className="num">Partition</th><th>Leader</th><th>Replicas</th><th>In sync</th>
              <th className="num">Log start</th><th className="num">Log end</th><th className="num">High watermark</th><th className="num" title="Last stable offset: read_committed consumers read up to here">Last stable</th><th className="num">Size</th>
            </tr>
          </thead>
          <tbody>
            {parts.map((p) => (
              <tr key={p.partition} className={p.offline ? "bad" : p.under_replicated ? "warn" : undefined}>
                <td className="num">{p.partition}</td>
                <td>{p.leader < 0 ? "none (offline)" : `broker ${p.leader}`}</td>
                <td>{p.replicas.join(", ")}</td>
                <td>{p.isr.join(", ")}{p.under_replicated && " (under-replicated)"}</td>
                <td className="num">{formatNumber(p.log_start_offset)}</td>
                <td className="num">{formatNumber(p.log_end_offset)}</td>
                <td className="num">{formatNumber(p.high_watermark)}</td>
                <td className="num">{formatNumber(p.last_stable_offset)}</td>
                <td className="num">{size[p.partition] === undefined ? <span className="muted">not measured yet</span> : formatBytes(size[p.partition])}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {states.data && (
        <section aria-label="Transactions">
          <h3>Open transactions</h3>
          <OpenTransactions partitions={parts} />
        </section>
      )}
      {states.data?.errors.length ? (
        <p className="state error" role="status">Some partition state could not be read just now: {states.data.errors.join("; ")}.</p>
      ) : null}
      <p className="muted" data-testid="sizes-as-of">
        {retention.data?.as_of ? `Sizes as of ${formatTimeFull(retention.data.as_of)} (the retention report).` : "Sizes are not measured yet: they come from the retention report once it has run."}
      </p>
      {atLeast(me?.role, "member") && (
        <form
          className="form inline"
          aria-label="Add partitions"
          onSubmit={(e) => {
            e.preventDefault();
            add.mutate(Number(count));
          }}
        >
          <Field label="New partition count" help="Partitions can be added, never removed; keyed records may move to other partitions." errors={fieldErrors(add.error, "partitions")}>
            {(a) => <input {...a} type="number" min={topic.partitions + 1} value={count} onChange={(e) => setCount(e.target.value)} />}
          </Field>
          <button type="submit" disabled={add.isPending}>Add partitions</button>
          {add.isSuccess && <span role="status">Done: {add.data.partitions} partitions.</span>}
          {!fieldErrors(add.error, "partitions").length && <FormError error={add.error} />}
        </form>
      )}
    </>
  );
}

function ConsumingGroup({ groupId, topic }: { groupId: string; topic: string }) {
  const g = useGroup(groupId);
  const rows = g.data?.offsets.filter((o) => o.topic === topic) ?? [];
  if (!rows.length) return null;
  return (
    <tr>
      <td><Link to={`/groups/${encodeURIComponent(groupId)}`}>{groupId}</Link></td>
      <td>{g.data?.state}</td>
      <td className="num">{formatNumber(rows.reduce((s, o) => s + (o.lag ?? 0), 0))}</td>
    </tr>
  );
}

function Consumers({ topic }: { topic: string }) {
  const groups = useGroups();
  if (groups.isPending) return <Loading what="consumer groups" />;
  if (groups.isError) {
    return (groups.error as { status?: number }).status === 404 ? (
      <p className="state empty">Consumer groups are not available on this control plane yet.</p>
    ) : <ErrorState error={groups.error} what="consumer groups" onRetry={() => groups.refetch()} />;
  }
  const list = groups.data.results.slice(0, 50);
  if (!list.length) return <p className="state empty">No consumer group has committed offsets yet.</p>;
  return (
    <table className="table compact" aria-label="Consuming groups">
      <thead><tr><th>Group</th><th>State</th><th className="num">Lag on this topic</th></tr></thead>
      <tbody>{list.map((g) => <ConsumingGroup key={g.group_id} groupId={g.group_id} topic={topic} />)}</tbody>
    </table>
  );
}

export function TopicDetailPage() {
  const { name = "" } = useParams();
  const topic = useTopic(name);
  const me = useMe().data;
  if (topic.isPending) return <Loading what={`topic ${name}`} />;
  if (isNotFound(topic.error)) {
    return (
      <Empty>
        There is no topic “{name}” in this organisation (it may have been deleted). <Link to="/topics">See all topics</Link>.
      </Empty>
    );
  }
  if (topic.isError) return <ErrorState error={topic.error} what={`topic ${name}`} onRetry={() => topic.refetch()} />;
  const t = topic.data;
  const base = `/topics/${encodeURIComponent(name)}`;
  return (
    <section aria-labelledby="topic-title">
      <h1 id="topic-title">{t.name}</h1>
      <p className="muted">{t.partitions} partitions · replication factor {t.replication_factor}</p>
      <nav className="tabs" aria-label="Topic">
        <NavLink to={base} end>Partitions</NavLink>
        <NavLink to={`${base}/configs`}>Configs</NavLink>
        <NavLink to={`${base}/messages`}>Messages</NavLink>
        <NavLink to={`${base}/live`}>Live tail</NavLink>
        {atLeast(me?.role, "member") && <NavLink to={`${base}/produce`}>Produce</NavLink>}
        <NavLink to={`${base}/consumers`}>Consumers</NavLink>
        <NavLink to={`${base}/throughput`}>Throughput</NavLink>
      </nav>
      <Routes>
        <Route index element={<Partitions topic={t} />} />
        <Route path="configs" element={<TopicConfigs topic={t} />} />
        <Route path="messages" element={<MessageBrowser topic={t} />} />
        <Route path="live" element={<LiveTail topic={t} />} />
        <Route path="produce" element={<ProduceForm topic={t} />} />
        <Route path="consumers" element={<Consumers topic={t.name} />} />
        <Route path="throughput" element={<TopicThroughput topic={t.name} />} />
      </Routes>
    </section>
  );
}
