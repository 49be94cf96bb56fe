import { useState } from "react";
import { ApiError } from "../api/client";
import { useTopicConfigDefinitions } from "../api/hooks/topicConfigs";
import type { TopicCreate } from "../api/hooks/topics";
import { Field } from "./Field";
import { FormError, fieldErrors } from "./States";

export const PRESETS: Record<string, { label: string; partitions: number; configs: Record<string, string> }> = {
  default: { label: "Default", partitions: 3, configs: {} },
  throughput: { label: "High throughput", partitions: 12, configs: { "compression.type": "lz4" } },
  compacted: { label: "Compacted (latest value per key)", partitions: 3, configs: { "cleanup.policy": "compact" } },
  short: { label: "Short retention (1 hour)", partitions: 3, configs: { "retention.ms": "3600000" } },
};

const NAME = /^[A-Za-z0-9._-]+$/;

/** Kafka's topic-name rules, checked before the server sees the request. */
export function validateTopic(name: string, partitions: string): Record<string, string> {
  const errors: Record<string, string> = {};
  if (!name) errors.name = "Give the topic a name.";
  else if (name.length > 249) errors.name = "A topic name is at most 249 characters.";
  else if (!NAME.test(name)) errors.name = "Use only letters, digits, '.', '_' and '-'.";
  else if (name === "." || name === "..") errors.name = "'.' and '..' are not topic names.";
  else if (name.startsWith("__")) errors.name = "Names starting with '__' are reserved for Sluice.";
  const p = Number(partitions);
  if (!Number.isInteger(p) || p < 1) errors.partitions = "Partitions must be a whole number, 1 or more.";
  return errors;
}

export function TopicCreateForm({
  onSubmit,
  busy,
  error,
  onCancel,
}: {
  onSubmit: (body: TopicCreate) => void;
  busy?: boolean;
  error?: unknown;
  onCancel?: () => void;
}) {
  const [preset, setPreset] = useState("default");
  const [name, setName] = useState("");
  const [partitions, setPartitions] = useState("3");
  const [retention, setRetention] = useState("");
  // null (untouched) or empty: none is sent, so the control plane's default applies, as for
  // `sluice topics create`; the field shows that default
  const [rf, setRf] = useState<string | null>(null);
  const rfBounds = useTopicConfigDefinitions().data?.replication_factor;
  const [local, setLocal] = useState<Record<string, string>>({});
  const server = (f: string) => fieldErrors(error, f);
  const errs = (f: string) => [...(local[f] ? [local[f]] : []), ...server(f)];

  function choose(p: string) {
    setPreset(p);
    setPartitions(String(PRESETS[p].partitions));
    setRetention(PRESETS[p].configs["retention.ms"] ?? "");
  }

  return (
    <form
      className="form"
      aria-label="Create topic"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        const v = validateTopic(name, partitions);
        if (retention && !/^-?\d+$/.test(retention)) v.retention = "Retention is a number of milliseconds (-1: forever).";
        const r = Number(rf ?? "");
        if (rf && (!Number.isInteger(r) || r < 1)) v.replication_factor = "The replication factor is a whole number, 1 or more.";
        else if (rf && rfBounds && r > rfBounds.maximum) v.replication_factor = `At most ${rfBounds.maximum}: one replica per live broker.`;
        setLocal(v);
        if (Object.keys(v).length) return;
        const configs: Record<string, string> = { ...PRESETS[preset].configs };
        if (retention) configs["retention.ms"] = retention;
        else delete configs["retention.ms"];
        onSubmit({ name, partitions: Number(partitions), ...(rf ? { replication_factor: r } : {}), configs, validate_only: false });
      }}
    >
      <fieldset>
        <legend>Preset</legend>
        <div className="segmented">
          {Object.entries(PRESETS).map(([k, p]) => (
            <label key={k}>
              <input type="radio" name="preset" value={k} checked={preset === k} onChange={() => choose(k)} />
              {p.label}
            </label>
          ))}
        </div>
      </fieldset>
      <Field label="Name" help="Letters, digits, '.', '_' and '-'; up to 249 characters." errors={errs("name")}>
        {(a) => <input {...a} value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" />}
      </Field>
      <Field label="Partitions" errors={errs("partitions")}>
        {(a) => <input {...a} type="number" min={1} value={partitions} onChange={(e) => setPartitions(e.target.value)} />}
      </Field>
      <Field
        label="Replication factor"
        help={rfBounds ? `Copies of each partition. Default ${rfBounds.default} (the control plane's, as sluice topics create uses); at most ${rfBounds.maximum} with the brokers live now.` : "Copies of each partition. Empty: the control plane's default."}
        errors={errs("replication_factor")}
      >
        {(a) => <input {...a} type="number" min={1} max={rfBounds?.maximum} placeholder="default" value={rf ?? (rfBounds ? String(rfBounds.default) : "")} onChange={(e) => setRf(e.target.value)} />}
      </Field>
      <Field label="Retention (ms)" help="Empty: the default (7 days). -1 keeps records forever." errors={[...errs("retention"), ...server("configs")]}>
        {(a) => <input {...a} inputMode="numeric" value={retention} onChange={(e) => setRetention(e.target.value)} />}
      </Field>
      <FormError error={error instanceof ApiError && Object.keys(error.fields).length ? null : error} />
      <div className="actions">
        {onCancel && (
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        )}
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Creating…" : "Create topic"}
        </button>
      </div>
    </form>
  );
}
