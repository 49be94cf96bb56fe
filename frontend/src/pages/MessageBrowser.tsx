// The message browser: every partition (or one) newest first, merged by timestamp, or oldest
// first from an offset or a time on each partition; pages by the server's cursor, with the
// scan progress shown (docs/console.md, "Message browser").
import { Fragment, useState } from "react";
import { exportUrl, useBrowse, type Browse, type BrowseParams, type ConsoleRecord } from "../api/hooks/messages";
import { useConsolePolicy } from "../api/hooks/policy";
import type { TopicDetail } from "../api/hooks/topics";
import { Field } from "../components/Field";
import { MessageView } from "../components/MessageView";
import { ErrorState, Loading, fieldErrors } from "../components/States";
import { ScanProgress } from "../components/ScanProgress";
import { formatNumber, formatTime } from "../lib/format";
import { partitionForKey } from "../lib/murmur2";

const PREVIEW = 80;
const DEFAULT_BUDGET = 10_000;

/** A table cell's view of a key or value: the first PREVIEW characters, and how long it is. */
export function preview(v: unknown): { text: string; length: number; cut: boolean } {
  if (v === null || v === undefined) return { text: "(null)", length: 0, cut: false };
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s.length > PREVIEW ? { text: s.slice(0, PREVIEW) + "…", length: s.length, cut: true } : { text: s, length: s.length, cut: false };
}

function Cell({ v }: { v: unknown }) {
  const p = preview(v);
  return (
    <>
      <code>{p.text}</code>
      {p.cut && <span className="muted cut-note"> {formatNumber(p.length)} characters: open the row to see all</span>}
    </>
  );
}

interface Loaded {
  records: ConsoleRecord[];
  scanned: number;
  toScan: number | null;
}

const NOTHING: Loaded = { records: [], scanned: 0, toScan: null };

export function MessageBrowser({ topic }: { topic: TopicDetail }) {
  const [partition, setPartition] = useState("all");
  const [start, setStart] = useState<BrowseParams["start"]>("latest");
  const [offset, setOffset] = useState("0");
  const [time, setTime] = useState("");
  const [limit, setLimit] = useState("50");
  const [budget, setBudget] = useState(String(DEFAULT_BUDGET));
  const [key, setKey] = useState("");
  const [headerName, setHeaderName] = useState("");
  const [headerValue, setHeaderValue] = useState("");
  const [jsonPath, setJsonPath] = useState("");
  const [jsonValue, setJsonValue] = useState("");
  const [params, setParams] = useState<BrowseParams>({ start: "latest", limit: 50 });
  // pages already shown ("Load older"/"Load more") and the cursor of the one being read
  const [loaded, setLoaded] = useState<Loaded>(NOTHING);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [open, setOpen] = useState<string | null>(null);
  const current = cursor ? { ...params, cursor } : params;
  const browse = useBrowse(topic.name, current);
  const policy = useConsolePolicy();

  const keyPartition = key ? partitionForKey(key, topic.partitions) : null;

  function search() {
    setOpen(null);
    setLoaded(NOTHING);
    setCursor(undefined);
    const next: BrowseParams = {
      start,
      partition: key || partition === "all" ? undefined : Number(partition),
      offset: start === "offset" ? Number(offset) : undefined,
      timestamp: start === "timestamp" && time ? new Date(time).getTime() : undefined,
      limit: Number(limit),
      scan_budget: Number(budget) === DEFAULT_BUDGET ? undefined : Number(budget),
      key: key || undefined,
      header_name: headerName || undefined,
      header_value: headerName && headerValue ? headerValue : undefined,
      json_path: jsonPath || undefined,
      json_value: jsonPath && jsonValue ? jsonValue : undefined,
    };
    // the same search again reads again: new records may have arrived
    if (!cursor && JSON.stringify(next) === JSON.stringify(params)) void browse.refetch();
    else setParams(next);
  }

  function more() {
    const d = browse.data;
    if (!d?.cursor) return;
    setLoaded({ records: [...loaded.records, ...d.records], scanned: loaded.scanned + d.scanned, toScan: loaded.toScan ?? d.to_scan });
    setCursor(d.cursor);
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
              <option value="all">All partitions</option>
              {Array.from({ length: topic.partitions }, (_, i) => <option key={i} value={i}>{i}</option>)}
            </select>
          )}
        </Field>
        <Field label="From">
          {(a) => (
            <select {...a} value={start} onChange={(e) => setStart(e.target.value as BrowseParams["start"])}>
              <option value="latest">Newest first</option>
              <option value="earliest">Oldest first (earliest)</option>
              <option value="offset">An offset (on each partition)</option>
              <option value="timestamp">A time (on each partition)</option>
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
        <Field label="Scan budget" help="Records read per search at most, over all partitions; go on with the button under the results." errors={fieldErrors(err, "scan_budget")}>
          {(a) => <input {...a} type="number" min={10} max={50000} value={budget} onChange={(e) => setBudget(e.target.value)} />}
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
      {policy.data?.allow_export !== false && browse.data && browse.data.records.length > 0 && (
        <p className="actions">
          Export this page:{" "}
          <a href={exportUrl(topic.name, current, "json")} download>JSON</a>{" "}
          <a href={exportUrl(topic.name, current, "csv")} download>CSV</a>
        </p>
      )}
      {policy.data?.allow_export === false && <p className="muted">Export is turned off by your organisation's policy.</p>}
      {browse.isError && !fieldErrors(err, "json_path").length && <ErrorState error={err} what="messages" />}
      {(browse.data || loaded.records.length > 0) && <Results data={browse.data} loaded={loaded} open={open} setOpen={setOpen} onMore={more} />}
      {browse.isFetching && <Loading what="messages" />}
    </div>
  );
}

function Results({
  data,
  loaded,
  open,
  setOpen,
  onMore,
}: {
  data: Browse | undefined;
  loaded: Loaded;
  open: string | null;
  setOpen: (id: string | null) => void;
  onMore: () => void;
}) {
  const records = [...loaded.records, ...(data?.records ?? [])];
  const newest = (data?.order ?? "newest_first") === "newest_first";
  const scanned = loaded.scanned + (data?.scanned ?? 0);
  const toScan = loaded.toScan ?? data?.to_scan ?? 0;
  return (
    <>
      {data?.unavailable && <p className="state error" role="alert">{data.unavailable}</p>}
      {data && (
        <>
          <p className="muted" data-testid="browse-summary">
            {newest ? "Newest first" : "Oldest first"}
            {data.partitions.length > 1 ? ", merged by timestamp across partitions" : ""}
            {data.key_partition ? ` (the key's partition, ${data.partitions[0]?.partition})` : ""}: {formatNumber(records.length)} shown.
            {data.partitions.length === 1 && data.partitions[0] && (
              <>
                {" "}Partition {data.partitions[0].partition} holds offsets {data.partitions[0].log_start_offset} to{" "}
                {data.partitions[0].high_watermark - 1 < data.partitions[0].log_start_offset ? "(empty)" : data.partitions[0].high_watermark - 1}.
              </>
            )}
          </p>
          <ScanProgress scanned={scanned} toScan={toScan} budget={data.scan_budget} partitions={data.partitions} done={data.reached_end} />
        </>
      )}
      {records.length === 0 && data && !data.unavailable ? (
        <p className="state empty">
          {!data.reached_end ? "No match in the records scanned so far." : "No messages match. Try another partition, an earlier start, or fewer filters."}
        </p>
      ) : records.length > 0 ? (
        <table className="table" aria-label="Messages">
          <thead><tr><th className="num">Partition</th><th className="num">Offset</th><th>Time</th><th>Key</th><th>Value</th></tr></thead>
          <tbody>
            {records.map((r) => {
              const id = `${r.partition}/${r.offset}`;
              return (
                <Fragment key={id}>
                  <tr className="clickable" tabIndex={0} aria-expanded={open === id} onClick={() => setOpen(open === id ? null : id)} onKeyDown={(e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); setOpen(open === id ? null : id); } }}>
                    <td className="num">{r.partition}</td>
                    <td className="num">{r.offset}</td>
                    <td>{formatTime(r.timestamp)}</td>
                    <td><Cell v={r.key} /></td>
                    <td><Cell v={r.value} /></td>
                  </tr>
                  {open === id && (
                    <tr>
                      <td colSpan={5}><MessageView record={r} /></td>
                    </tr>
                  )}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      ) : null}
      {data?.cursor && !data.reached_end && (
        <p className="actions">
          <button type="button" onClick={onMore}>
            {records.length === 0 ? "Scan further" : newest ? "Load older" : "Load newer"}
          </button>
        </p>
      )}
    </>
  );
}
