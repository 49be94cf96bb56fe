import { useState } from "react";
import { Link, useParams } from "react-router-dom";
import { ApiError, isNotFound } from "../api/client";
import { atLeast, useMe } from "../api/hooks/auth";
import { useGroup, useResetOffsets, useUndoReset, type ResetPlan, type ResetStrategy } from "../api/hooks/groups";
import { Field } from "../components/Field";
import { GroupDelete } from "../components/GroupDelete";
import { GroupMembers } from "../components/GroupMembers";
import { GroupLagChart } from "../components/GroupLagChart";
import { LagTable } from "../components/LagTable";
import { Empty, ErrorState, FormError, Loading, fieldErrors } from "../components/States";
import { formatNumber } from "../lib/format";
import { stateLabel, typeLabel } from "./Groups";

const STRATEGIES: { value: ResetStrategy; label: string; help: string }[] = [
  { value: "earliest", label: "Earliest", help: "Re-read everything still retained." },
  { value: "latest", label: "Latest", help: "Skip to the end: nothing is re-read." },
  { value: "offset", label: "A specific offset", help: "The same offset for every chosen partition." },
  { value: "datetime", label: "A point in time", help: "The first offset at or after this time (UTC ISO 8601)." },
  { value: "shift-by", label: "Shift by N", help: "Move each offset by N (negative: back)." },
  { value: "by-duration", label: "Back by a duration", help: "ISO 8601 duration, e.g. PT1H." },
];

function PlanTable({ plan }: { plan: ResetPlan }) {
  return (
    <table className="table compact" aria-label="Reset plan">
      <thead><tr><th>Topic</th><th className="num">Partition</th><th className="num">Current</th><th className="num">Target</th><th className="num">Change</th></tr></thead>
      <tbody>
        {plan.plan.map((r) => (
          <tr key={`${r.topic}/${r.partition}`}>
            <td>{r.topic}</td><td className="num">{r.partition}</td><td className="num">{formatNumber(r.current)}</td>
            <td className="num">{formatNumber(r.target)}</td><td className="num">{r.delta === null ? "—" : (r.delta > 0 ? "+" : "") + formatNumber(r.delta)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ResetOffsets({ groupId, topics }: { groupId: string; topics: string[] }) {
  const reset = useResetOffsets(groupId);
  const undo = useUndoReset(groupId);
  const [topic, setTopic] = useState(topics[0] ?? "");
  const [partitions, setPartitions] = useState("");
  const [strategy, setStrategy] = useState<ResetStrategy>("earliest");
  const [value, setValue] = useState("");
  const [preview, setPreview] = useState<ResetPlan | null>(null);
  const [applied, setApplied] = useState<ResetPlan | null>(null);
  const needsValue = !["earliest", "latest"].includes(strategy);

  function request(dry_run: boolean) {
    const parts = partitions.trim() ? partitions.split(",").map((p) => Number(p.trim())) : null;
    const v = !needsValue ? null : strategy === "offset" || strategy === "shift-by" ? Number(value) : value;
    reset.mutate(
      { topic, partitions: parts, strategy, value: v, dry_run },
      { onSuccess: (r) => (dry_run ? (setPreview(r), setApplied(null)) : (setApplied(r), setPreview(null))) },
    );
  }
  const err = reset.error;
  return (
    <div className="panel">
      <h2>Reset offsets</h2>
      <p className="muted">The group must have no active members. Preview first; an applied reset can be undone.</p>
      <form className="form grid" aria-label="Reset offsets" onSubmit={(e) => { e.preventDefault(); request(true); }}>
        <Field label="Topic" errors={fieldErrors(err, "topic")}>
          {(a) => <input {...a} list="group-topics" value={topic} onChange={(e) => { setTopic(e.target.value); setPreview(null); }} />}
        </Field>
        <datalist id="group-topics">{topics.map((t) => <option key={t} value={t} />)}</datalist>
        <Field label="Partitions" help="Comma-separated; empty: all." errors={fieldErrors(err, "partitions")}>
          {(a) => <input {...a} value={partitions} onChange={(e) => { setPartitions(e.target.value); setPreview(null); }} placeholder="all" />}
        </Field>
        <Field label="Reset to" help={STRATEGIES.find((s) => s.value === strategy)?.help}>
          {(a) => (
            <select {...a} value={strategy} onChange={(e) => { setStrategy(e.target.value as ResetStrategy); setPreview(null); }}>
              {STRATEGIES.map((s) => <option key={s.value} value={s.value}>{s.label}</option>)}
            </select>
          )}
        </Field>
        {needsValue && (
          <Field label="Value" errors={fieldErrors(err, "value")}>
            {(a) => <input {...a} value={value} onChange={(e) => { setValue(e.target.value); setPreview(null); }} />}
          </Field>
        )}
        <div className="actions">
          <button type="submit" disabled={reset.isPending || !topic}>Preview (dry run)</button>
          <button type="button" className="danger" disabled={!preview || reset.isPending} onClick={() => request(false)}>
            Apply reset
          </button>
        </div>
      </form>
      {err instanceof ApiError && err.code === "GROUP_NOT_EMPTY" ? (
        <p className="state error" role="alert">The group still has members. Stop its consumers, then reset.</p>
      ) : !(err instanceof ApiError && Object.keys(err.fields).length) && <FormError error={err} />}
      {preview && (<><h3>Preview (nothing changed yet)</h3><PlanTable plan={preview} /></>)}
      {applied && (
        <>
          <h3>Reset applied</h3>
          <p role="status" className="muted">The group now starts from these offsets. Undo puts the previous ones back.</p>
          <PlanTable plan={applied} />
          {applied.reset_id && (
            <button type="button" disabled={undo.isPending} onClick={() => undo.mutate(applied.reset_id!, { onSuccess: () => setApplied(null) })}>
              Undo this reset
            </button>
          )}
          <FormError error={undo.error} />
        </>
      )}
      {undo.isSuccess && <p role="status">The reset was undone; offsets are back where they were.</p>}
    </div>
  );
}

export function GroupDetailPage() {
  const { groupId = "" } = useParams();
  const group = useGroup(groupId);
  const me = useMe().data;
  if (group.isPending) return <Loading what={`group ${groupId}`} />;
  if (isNotFound(group.error)) {
    return (
      <Empty>
        There is no consumer group “{groupId}” in this organisation (it may have been deleted).{" "}
        <Link to="/groups">See all consumer groups</Link>.
      </Empty>
    );
  }
  if (group.isError) return <ErrorState error={group.error} what={`group ${groupId}`} onRetry={() => group.refetch()} />;
  const g = group.data;
  const topics = [...new Set(g.offsets.map((o) => o.topic))];
  return (
    <section aria-labelledby="group-title">
      <h1 id="group-title">{g.group_id}</h1>
      <p className="muted">
        {stateLabel(g.state)} · {typeLabel(g.type)} protocol · coordinator {g.coordinator ?? "none"} · {g.members.length} members
      </p>
      <h2>Lag</h2>
      <LagTable offsets={g.offsets} />
      <GroupLagChart groupId={g.group_id} />
      <h2>Members</h2>
      <GroupMembers members={g.members} />
      {atLeast(me?.role, "member") && <ResetOffsets groupId={g.group_id} topics={topics} />}
      {atLeast(me?.role, "member") && <GroupDelete groupId={g.group_id} members={g.members.length} />}
    </section>
  );
}
