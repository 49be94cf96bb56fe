import { useState } from "react";
import { Link, useNavigate } from "react-router-dom";
import { atLeast, useMe } from "../api/hooks/auth";
import { messageCount, usePartitionStates } from "../api/hooks/partitions";
import { useCreateTopic, useDeleteTopic, useTopics } from "../api/hooks/topics";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { Empty, ErrorState, FormError, Loading } from "../components/States";
import { TopicCreateForm } from "../components/TopicCreateForm";
import { formatDuration, formatNumber } from "../lib/format";
import { useMessageRates } from "../lib/rates";

export function Topics() {
  const me = useMe().data;
  const canWrite = atLeast(me?.role, "member");
  const topics = useTopics();
  const states = usePartitionStates(undefined, 5000);
  const rates = useMessageRates(states.data);
  const create = useCreateTopic();
  const del = useDeleteTopic();
  const navigate = useNavigate();
  const [search, setSearch] = useState("");
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<string | null>(null);
  const latest = rates[rates.length - 1];
  const counts: Record<string, number> = {};
  for (const t of states.data?.topics ?? []) counts[t.name] = t.partitions.reduce((s, p) => s + (messageCount(p) ?? 0), 0);

  const shown = (topics.data ?? []).filter((t) => t.name.toLowerCase().includes(search.toLowerCase()));
  return (
    <section aria-labelledby="topics-title">
      <div className="page-head">
        <h1 id="topics-title">Topics</h1>
        {canWrite && !creating && (
          <button type="button" className="primary" onClick={() => setCreating(true)}>
            New topic
          </button>
        )}
      </div>
      {creating && (
        <div className="panel">
          <h2>New topic</h2>
          <TopicCreateForm
            busy={create.isPending}
            error={create.error}
            onCancel={() => {
              setCreating(false);
              create.reset();
            }}
            onSubmit={(body) =>
              create.mutate(body, {
                onSuccess: (t) => {
                  setCreating(false);
                  navigate(`/topics/${encodeURIComponent(t.name)}`);
                },
              })
            }
          />
        </div>
      )}
      <label className="search">
        <span>Search</span>
        <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="Filter topics by name" />
      </label>
      {topics.isPending ? (
        <Loading what="topics" />
      ) : topics.isError ? (
        <ErrorState error={topics.error} what="topics" onRetry={() => topics.refetch()} />
      ) : shown.length === 0 ? (
        <Empty>{search ? `No topic matches “${search}”.` : canWrite ? "No topics yet. Create the first one with “New topic”." : "This organisation has no topics yet."}</Empty>
      ) : (
        <table className="table" aria-label="Topics">
          <thead>
            <tr>
              <th>Name</th>
              <th className="num">Partitions</th>
              <th className="num">Replication</th>
              <th>Retention</th>
              <th className="num">Messages</th>
              <th className="num">Messages/s</th>
              {canWrite && <th><span className="sr-only">Actions</span></th>}
            </tr>
          </thead>
          <tbody>
            {shown.map((t) => {
              const ret = t.configs["retention.ms"];
              return (
                <tr key={t.name}>
                  <td><Link to={`/topics/${encodeURIComponent(t.name)}`}>{t.name}</Link></td>
                  <td className="num">{t.partitions}</td>
                  <td className="num">{t.replication_factor}</td>
                  <td>{ret === undefined ? "default" : ret === "-1" ? "forever" : formatDuration(Number(ret))}</td>
                  <td className="num">{formatNumber(counts[t.name])}</td>
                  <td className="num">{latest ? formatNumber(latest.byTopic[t.name] ?? 0, 1) : "…"}</td>
                  {canWrite && (
                    <td>
                      <button type="button" className="danger small" onClick={() => setDeleting(t.name)} aria-label={`Delete ${t.name}`}>
                        Delete
                      </button>
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {deleting && (
        <ConfirmDialog
          title={`Delete topic ${deleting}?`}
          body="Its records are deleted on every broker and cannot be recovered. Producers and consumers using it will get errors."
          confirmLabel="Delete topic"
          typeToConfirm={deleting}
          busy={del.isPending}
          onCancel={() => setDeleting(null)}
          onConfirm={() => del.mutate(deleting, { onSuccess: () => setDeleting(null) })}
        />
      )}
      <FormError error={del.error} />
    </section>
  );
}
