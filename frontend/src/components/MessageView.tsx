// One record's key, value and headers in JSON, text or hex, whole (the tables cut long values
// to a preview), with the value's size, a copy button and a download of the value as the
// broker gave it. Payloads are untrusted: they are only ever rendered as React text nodes
// inside <pre>, never as HTML.
import { useState } from "react";
import { base64ToBytes, base64ToText, formatBytes, formatTime, hexDump } from "../lib/format";

export interface ViewRecord {
  partition: number;
  offset: number;
  timestamp: number;
  key: unknown;
  key_format?: string;
  value: unknown;
  value_format?: string;
  headers: { name: string; value: string | null }[];
}

export type ViewMode = "json" | "text" | "hex";

function bytesOf(v: unknown, format?: string): Uint8Array {
  if (v === null || v === undefined) return new Uint8Array();
  if (format === "base64" && typeof v === "string") return base64ToBytes(v);
  const text = format === "json" ? JSON.stringify(v) : String(v);
  return new TextEncoder().encode(text);
}

export function renderPayload(v: unknown, format: string | undefined, mode: ViewMode): string {
  if (v === null || v === undefined) return "(null)";
  if (mode === "hex") return hexDump(bytesOf(v, format));
  if (format === "json") return mode === "json" ? JSON.stringify(v, null, 2) : JSON.stringify(v);
  if (format === "base64" && typeof v === "string") {
    return mode === "text" || mode === "json" ? `(binary, ${base64ToBytes(v).length} bytes; use the hex view)` : v;
  }
  return String(v);
}

/** The value as a file: the bytes of a binary value, else its text (JSON compact). */
export function valueFile(record: ViewRecord): { blob: Blob; name: string } {
  const binary = record.value_format === "base64";
  const ext = binary ? "bin" : record.value_format === "json" ? "json" : "txt";
  const body: BlobPart = binary ? new Uint8Array(bytesOf(record.value, record.value_format)) : renderPayload(record.value, record.value_format, "text");
  const type = binary ? "application/octet-stream" : record.value_format === "json" ? "application/json" : "text/plain";
  return { blob: new Blob([body], { type }), name: `partition-${record.partition}-offset-${record.offset}.${ext}` };
}

function download(record: ViewRecord) {
  const { blob, name } = valueFile(record);
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function MessageView({ record, initialMode = "json" }: { record: ViewRecord; initialMode?: ViewMode }) {
  const [mode, setMode] = useState<ViewMode>(initialMode);
  const [copied, setCopied] = useState("");
  const size = bytesOf(record.value, record.value_format).length;
  const value = renderPayload(record.value, record.value_format, mode);

  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setCopied("Copied.");
    } catch {
      setCopied("The browser did not allow copying: use Download.");
    }
  }
  return (
    <div className="message-view">
      <div className="meta">
        <span>partition {record.partition}</span> · <span>offset {record.offset}</span> ·{" "}
        <span>{formatTime(record.timestamp)}</span>
      </div>
      <div role="radiogroup" aria-label="View as" className="segmented">
        {(["json", "text", "hex"] as ViewMode[]).map((m) => (
          <label key={m}>
            <input type="radio" name={`mode-${record.partition}-${record.offset}`} checked={mode === m} onChange={() => setMode(m)} />
            {m.toUpperCase()}
          </label>
        ))}
      </div>
      <h4>Key</h4>
      <pre className="payload" data-testid="message-key">
        {renderPayload(record.key, record.key_format, mode)}
      </pre>
      <h4>
        Value <span className="muted" data-testid="message-value-size">({formatBytes(size)})</span>
      </h4>
      <div className="actions">
        <button type="button" onClick={copy} disabled={record.value === null || record.value === undefined}>
          Copy value
        </button>{" "}
        <button type="button" onClick={() => download(record)} disabled={record.value === null || record.value === undefined}>
          Download value
        </button>{" "}
        <span role="status">{copied}</span>
      </div>
      <pre className="payload" data-testid="message-value">
        {value}
      </pre>
      <h4>Headers</h4>
      {record.headers.length === 0 ? (
        <p className="muted">No headers.</p>
      ) : (
        <table className="table compact">
          <thead>
            <tr>
              <th>Name</th>
              <th>Value</th>
            </tr>
          </thead>
          <tbody>
            {record.headers.map((h, i) => (
              <tr key={i}>
                <td>{h.name}</td>
                <td>
                  <code>{h.value === null ? "(null)" : (base64ToText(h.value) ?? `base64:${h.value}`)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
