import { Fragment, useState } from "react";
import { exportUrl, useBrowse, type BrowseParams } from "../api/hooks/messages";
import { useConsolePolicy } from "../api/hooks/policy";
import type { TopicDetail } from "../api/hooks/topics";
import { Field } from "../components/Field";
import { MessageView } from "../components/MessageView";
import { ErrorState, Loading, fieldErrors } from "../components/States";
import { formatTime } from "../lib/format";
import { partitionForKey } from "../lib/murmur2";

function preview(v: unknown): string {
  if (v === null || v === undefined) return "(null)";
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 80) + "…" : s;
}

export function MessageBrowser({ topic }: { topic: TopicDetail }) {
  const [partition, setPartition] = useState("0");
  const [start, setStart] = useState<BrowseParams["start"]>("latest");
  const [offset, setOffset] = useState("0");
  const [time, setTime] = useState("");
  const [limit, setLimit] = useState("50");
  const [key, setKey] = useState("");
  const [headerName, setHeaderName] = useState("");
  const [headerValue, setHeaderValue] = useState("");
  const [jsonPath, setJsonPath] = useState("");
  const [jsonValue, setJsonValue] = useState("");
  const [params, setParams] = useState<BrowseParams | null>({ start: "latest", partition: 0, limit: 50 });
  const [open, setOpen] = useState<string | null>(null);
  const browse = useBrowse(topic.name, params);
  const policy = useConsolePolicy();

  const keyPartition = key ? partitionForKey(key, topic.partitions) : null;

  function search() {
    setOpen(null);
    setParams({
      start,
      partition: key ? undefined : Number(partition),
      offset: start === "offset" ? Number(offset) : undefined,
      timestamp: start === "timestamp" && time ? new Date(time).getTime() : undefined,
      limit: Number(limit),
      key: key || undefined,
      header_name: headerName || undefined,
      header_value: headerName && headerValue ? headerValue : undefined,
      json_path: jsonPath || undefined,
      json_value: jsonPath && jsonValue ? jsonValue : undefined,
    });
  }

  const err = browse.error;
  return (
    <div>
      <form
        className="form grid"
        aria-label="Find messages"
        onSubmit={(e) => {
          e.preventDefault();
          search();
        }}
      >
        <Field label="Partition" help={keyPartition !== null ? `Searching by key: partition ${keyPartition} (murmur2, as Kafka)` : undefined} errors={fieldErrors(err, "partition")}>
          {(a) => (
            <select {...a} value={keyPartition ?? partition} disabled={keyPartition !== null} onChange={(e) => setPartition(e.target.value)}>
              {Array.from({ length: topic.partitions }, (_, i) => <option key={i} value={i}>{i}</option>)}
            </select>
          )}
        </Field>
        <Field label="From">
          {(a) => (
            <select {...a} value={start} onChange={(e) => setStart(e.target.value as BrowseParams["start"])}>
              <option value="latest">Latest (the last N)</option>
              <option value="earliest">Earliest</option>
              <option value="offset">An offset</option>
              <option value="timestamp">A time</option>
            </select>
          )}
        </Field>
        {start === "offset" && (
          <Field label="Offset" errors={fieldErrors(err, "offset")}>
            {(a) => <input {...a} type="number" min={0} value={offset} onChange={(e) => setOffset(e.target.value)} />}
          </Field>
        )}
        {start === "timestamp" && (
          <Field label="Time (your local time)" errors={fieldErrors(err, "timestamp")}>
            {(a) => <input {...a} type="datetime-local" step={1} value={time} onChange={(e) => setTime(e.target.value)} />}
          </Field>
        )}
        <Field label="Show at most" errors={fieldErrors(err, "limit")}>
          {(a) => <input {...a} type="number" min={1} max={500} value={limit} onChange={(e) => setLimit(e.target.value)} />}
        </Field>
        <Field label="Key" help="Exact key; only its partition is read.">
          {(a) => <input {...a} value={key} onChange={(e) => setKey(e.target.value)} />}
        </Field>
        <Field label="Header name">
          {(a) => <input {...a} value={headerName} onChange={(e) => setHeaderName(e.target.value)} />}
        </Field>
        <Field label="Header value" help="Empty: any value.">
          {(a) => <input {...a} value={headerValue} onChange={(e) => setHeaderValue(e.target.value)} disabled={!headerName} />}
        </Field>
        <Field label="JSON path" help='e.g. $.order.id or $.items[0]["sku"]; evaluated as a path, never as code.' errors={fieldErrors(err, "json_path")}>
          {(a) => <input {...a} value={jsonPath} onChange={(e) => setJsonPath(e.target.value)} placeholder="$.field" />}
        </Field>
        <Field label="equals" help="Empty: the path exists.">
          {(a) => <input {...a} value={jsonValue} onChange={(e) => setJsonValue(e.target.value)} disabled={!jsonPath} />}
        </Field>
        <div className="actions">
          <button type="submit" className="primary">Search</button>
        </div>
      </form>
      {params && policy.data?.allow_export !== false && browse.data && browse.data.records.length > 0 && (
        <p className="actions">
          Export these:{" "}
          <a href={exportUrl(topic.name, params, "json")} download>JSON</a>{" "}
          <a href={exportUrl(topic.name, params, "csv")} download>CSV</a>
        </p>
      )}
      {policy.data?.allow_export === false && <p className="muted">Export is turned off by your organisation's policy.</p>}
      {browse.isFetching && <Loading what="messages" />}
      {browse.isError && !fieldErrors(err, "json_path").length && <ErrorState error={err} what="messages" />}
      {browse.data && (
        <>
          {browse.data.unavailable && <p className="state error" role="alert">{browse.data.unavailable}</p>}
          <p className="muted" data-testid="browse-summary">
            Partition {browse.data.partition}: offsets {browse.data.log_start_offset} to {browse.data.high_watermark - 1 < browse.data.log_start_offset ? "(empty)" : browse.data.high_watermark - 1};{" "}
            {browse.data.records.length} shown of {browse.data.scanned} read.
            {!browse.data.reached_end && (
              <>
                {" "}
                <button type="button" className="link" onClick={() => { setStart("offset"); setOffset(String(browse.data!.next_offset)); setParams({ ...params!, start: "offset", offset: browse.data!.next_offset }); }}>
                  Continue from offset {browse.data.next_offset}
                </button>
              </>
            )}
          </p>
          {browse.data.records.length === 0 && !browse.data.unavailable ? (
            <p className="state empty">No messages match. Try another partition, an earlier start, or fewer filters.</p>
          ) : (
            <table className="table" aria-label="Messages">
              <thead><tr><th className="num">Offset</th><th>Time</th><th>Key</th><th>Value</th></tr></thead>
              <tbody>
                {browse.data.records.map((r) => {
                  const id = `${r.partition}/${r.offset}`;
                  return (
                    <Fragment key={id}>
                      <tr className="clickable" tabIndex={0} aria-expanded={open === id} onClick={() => setOpen(open === id ? null : id)} onKeyDown={(e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); setOpen(open === id ? null : id); } }}>
                        <td className="num">{r.offset}</td>
                        <td>{formatTime(r.timestamp)}</td>
                        <td><code>{preview(r.key)}</code></td>
                        <td><code>{preview(r.value)}</code></td>
                      </tr>
                      {open === id && (
                        <tr>
                          <td colSpan={4}><MessageView record={r} /></td>
                        </tr>
                      )}
                    </Fragment>
                  );
                })}
              </tbody>
            </table>
          )}
        </>
      )}
    </div>
  );
}
