// Live tail over the control plane's Channels WebSocket (/ws/console/tail): every partition by
// default (newest on top, as they arrive), or the one chosen. Closing the page, the tab or
// navigating away closes the socket (effect cleanup), and the server then closes its streams
// from the brokers.
import { Fragment, useEffect, useRef, useState } from "react";
import type { TopicDetail } from "../api/hooks/topics";
import { MessageView, type ViewRecord } from "../components/MessageView";
import { formatNumber, formatTime } from "../lib/format";

const KEEP = 500;
export const TAIL_MAX_PARTITIONS = 64; // the server follows at most this many at once

function cut(v: unknown): string {
  const s = v === null || v === undefined ? "(null)" : typeof v === "string" ? v : JSON.stringify(v);
  return s.length > 120 ? `${s.slice(0, 120)}… (${s.length} characters: open the row)` : s;
}

function matches(r: ViewRecord, filter: string): boolean {
  if (!filter) return true;
  const f = filter.toLowerCase();
  const text = (v: unknown) => (v === null || v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v)).toLowerCase();
  return text(r.key).includes(f) || text(r.value).includes(f);
}

export function LiveTail({ topic }: { topic: TopicDetail }) {
  const everyPartition = topic.partitions <= TAIL_MAX_PARTITIONS;
  const [partition, setPartition] = useState<string>(everyPartition ? "all" : "0");
  const [status, setStatus] = useState<"connecting" | "live" | "paused" | "closed">("connecting");
  const [message, setMessage] = useState("");
  const [records, setRecords] = useState<ViewRecord[]>([]);
  const [filter, setFilter] = useState("");
  const [rate, setRate] = useState(0);
  const [open, setOpen] = useState<string | null>(null);
  const ws = useRef<WebSocket | null>(null);
  const arrivals = useRef<number[]>([]);

  useEffect(() => {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams({ topic: topic.name, partition, from: "latest" });
    const sock = new WebSocket(`${proto}//${location.host}/ws/console/tail?${q}`);
    ws.current = sock;
    setStatus("connecting");
    setMessage("");
    setRecords([]);
    sock.onmessage = (ev) => {
      const doc = JSON.parse(ev.data as string);
      if (doc.type === "open") setStatus("live");
      else if (doc.type === "records") {
        const now = Date.now();
        for (let i = 0; i < doc.records.length; i++) arrivals.current.push(now);
        setRecords((rs) => [...doc.records.slice().reverse(), ...rs].slice(0, KEEP));
      } else if (doc.type === "closed") setMessage(doc.message);
    };
    sock.onclose = (ev) => {
      setStatus("closed");
      if (ev.code === 4401) setMessage("Your session has ended. Sign in again.");
      else if (ev.code === 4404) setMessage("This topic or partition no longer exists.");
      else if (ev.code === 4403) setMessage("Not allowed to read this topic.");
      else if (ev.code === 4400) setMessage(`Choose one partition: the live tail follows at most ${TAIL_MAX_PARTITIONS} at once.`);
      // access ended while open (removed, role, deactivated): the server said why just before
      else if (ev.code === 4410) setMessage((m) => m || "Live tail closed: you may no longer read this organisation's topics.");
      else if (ev.code !== 1000 && ev.code !== 1005) setMessage((m) => m || "The live tail stopped. Reopen the tab to start it again.");
    };
    const close = () => sock.close(1000);
    window.addEventListener("pagehide", close);
    const tick = setInterval(() => {
      const cutoff = Date.now() - 5000;
      arrivals.current = arrivals.current.filter((t) => t >= cutoff);
      setRate(arrivals.current.length / 5);
    }, 1000);
    return () => {
      clearInterval(tick);
      window.removeEventListener("pagehide", close);
      sock.onclose = null; // a socket we close on purpose is not an error to show
      sock.onmessage = null;
      sock.close(1000);
      ws.current = null;
    };
  }, [topic.name, partition]);

  function pause(p: boolean) {
    ws.current?.send(JSON.stringify({ pause: p }));
    setStatus(p ? "paused" : "live");
  }

  const shown = records.filter((r) => matches(r, filter));
  return (
    <div>
      <div className="toolbar">
        <label>
          Partition{" "}
          <select value={partition} onChange={(e) => setPartition(e.target.value)}>
            <option value="all" disabled={!everyPartition}>
              {everyPartition ? "All partitions" : `All partitions (at most ${TAIL_MAX_PARTITIONS}: choose one)`}
            </option>
            {Array.from({ length: topic.partitions }, (_, i) => <option key={i} value={i}>{i}</option>)}
          </select>
        </label>
        <span className={`badge ${status}`} role="status" data-testid="tail-status">{status}</span>
        {status === "live" && <button type="button" onClick={() => pause(true)}>Pause</button>}
        {status === "paused" && <button type="button" onClick={() => pause(false)}>Resume</button>}
        <label>
          Filter{" "}
          <input type="search" value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="text in key or value" />
        </label>
        <span data-testid="tail-rate">{formatNumber(rate, 1)} messages/s</span>
      </div>
      {message && <p className="state error" role="alert">{message}</p>}
      {shown.length === 0 ? (
        <p className="state empty">{records.length ? "No record matches the filter." : status === "closed" ? "The tail is closed: no new records arrive." : "Waiting for new records… produce one to see it here."}</p>
      ) : (
        <table className="table" aria-label="Live records">
          <thead><tr><th className="num">Partition</th><th className="num">Offset</th><th>Time</th><th>Key</th><th>Value</th></tr></thead>
          <tbody>
            {shown.map((r) => {
              const id = `${r.partition}/${r.offset}`;
              const toggle = () => setOpen(open === id ? null : id);
              return (
                <Fragment key={id}>
                  <tr className="clickable" tabIndex={0} onClick={toggle} aria-expanded={open === id} onKeyDown={(e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); } }}>
                    <td className="num">{r.partition}</td>
                    <td className="num">{r.offset}</td>
                    <td>{formatTime(r.timestamp)}</td>
                    <td><code>{cut(r.key)}</code></td>
                    <td><code>{cut(r.value)}</code></td>
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
      )}
    </div>
  );
}
