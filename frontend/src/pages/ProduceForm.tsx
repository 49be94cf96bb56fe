import { useState } from "react";
import { ApiError } from "../api/client";
import { useProduce } from "../api/hooks/messages";
import type { TopicDetail } from "../api/hooks/topics";
import { Field } from "../components/Field";
import { FormError, fieldErrors } from "../components/States";
import { partitionForKey } from "../lib/murmur2";

export function ProduceForm({ topic }: { topic: TopicDetail }) {
  const produce = useProduce(topic.name);
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [valueType, setValueType] = useState<"STRING" | "JSON">("STRING");
  const [partition, setPartition] = useState("");
  const [headers, setHeaders] = useState<{ name: string; value: string }[]>([]);
  const auto = key ? `by key: partition ${partitionForKey(key, topic.partitions)}` : "partition 0";
  const err = produce.error;
  return (
    <form
      className="form"
      aria-label="Produce a test message"
      onSubmit={(e) => {
        e.preventDefault();
        produce.mutate({
          key: key || null,
          value,
          value_type: valueType,
          headers: headers.filter((h) => h.name),
          partition: partition === "" ? null : Number(partition),
        });
      }}
    >
      <Field label="Key" help="Empty: no key.">
        {(a) => <input {...a} value={key} onChange={(e) => setKey(e.target.value)} />}
      </Field>
      <Field label="Value" errors={fieldErrors(err, "value")}>
        {(a) => <textarea {...a} rows={5} value={value} onChange={(e) => setValue(e.target.value)} />}
      </Field>
      <Field label="Value type">
        {(a) => (
          <select {...a} value={valueType} onChange={(e) => setValueType(e.target.value as "STRING" | "JSON")}>
            <option value="STRING">Text</option>
            <option value="JSON">JSON</option>
          </select>
        )}
      </Field>
      <Field label="Partition" help={`Automatic: ${auto}.`} errors={fieldErrors(err, "partition")}>
        {(a) => (
          <select {...a} value={partition} onChange={(e) => setPartition(e.target.value)}>
            <option value="">Automatic</option>
            {Array.from({ length: topic.partitions }, (_, i) => <option key={i} value={i}>{i}</option>)}
          </select>
        )}
      </Field>
      <fieldset>
        <legend>Headers</legend>
        {headers.map((h, i) => (
          <div key={i} className="row">
            <input aria-label={`Header ${i + 1} name`} placeholder="name" value={h.name} onChange={(e) => setHeaders(headers.map((x, j) => (j === i ? { ...x, name: e.target.value } : x)))} />
            <input aria-label={`Header ${i + 1} value`} placeholder="value" value={h.value} onChange={(e) => setHeaders(headers.map((x, j) => (j === i ? { ...x, value: e.target.value } : x)))} />
            <button type="button" onClick={() => setHeaders(headers.filter((_, j) => j !== i))} aria-label={`Remove header ${i + 1}`}>Remove</button>
          </div>
        ))}
        <button type="button" onClick={() => setHeaders([...headers, { name: "", value: "" }])}>Add header</button>
      </fieldset>
      {!(err instanceof ApiError && Object.keys(err.fields).length) && <FormError error={err} />}
      <div className="actions">
        <button type="submit" className="primary" disabled={produce.isPending}>
          {produce.isPending ? "Producing…" : "Produce"}
        </button>
        {produce.isSuccess && (
          <span role="status" data-testid="produced">
            Written to partition {produce.data.partition} at offset {produce.data.offset}.
          </span>
        )}
      </div>
    </form>
  );
}
