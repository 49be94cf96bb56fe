import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import type { Browse, ConsoleRecord } from "../api/hooks/messages";
import type { TopicDetail } from "../api/hooks/topics";
import { MessageBrowser, preview } from "./MessageBrowser";

const topic = { name: "orders", partitions: 3 } as TopicDetail;
const long = "v".repeat(5000);

function rec(partition: number, offset: number, ts: number, value: unknown = `value-${partition}-${offset}`): ConsoleRecord {
  return { partition, offset, timestamp: ts, timestamp_type: "CREATE_TIME", key: `k${offset}`, key_format: "text", value, value_format: "text", headers: [] };
}

function page(over: Partial<Browse> = {}): Browse {
  return {
    topic: "orders", order: "newest_first", key_partition: false,
    partitions: [0, 1, 2].map((p) => ({ partition: p, log_start_offset: 0, high_watermark: 40, scanned: 10, to_scan: 40, unavailable: null })),
    records: [rec(2, 39, 3000, long), rec(0, 39, 2000), rec(1, 39, 1000)],
    scanned: 30, to_scan: 120, scan_budget: 10000, cursor: "0:38,1:38,2:38", reached_end: false, unavailable: null,
    ...over,
  };
}

function renderWith(first: Browse, next?: Browse) {
  // the control plane's answers, seeded into the cache; nothing is fetched during the test
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["console-policy"], { allow_export: true });
  qc.setQueryData(["messages", "orders", { start: "latest", limit: 50 }], first);
  if (next && first.cursor) qc.setQueryData(["messages", "orders", { start: "latest", limit: 50, cursor: first.cursor }], next);
  return render(<QueryClientProvider client={qc}><MessageBrowser topic={topic} /></QueryClientProvider>);
}

function cells(col: number): string[] {
  const table = screen.getByRole("table", { name: "Messages" });
  return within(table).getAllByRole("row").slice(1).filter((r) => !r.querySelector(".message-view")).map((r) => within(r).getAllByRole("cell")[col].textContent ?? "");
}

describe("MessageBrowser", () => {
  it("opens on every partition, newest first, with the partition of each record", () => {
    renderWith(page());
    expect((screen.getByLabelText("Partition") as HTMLSelectElement).value).toBe("all");
    expect(cells(0)).toEqual(["2", "0", "1"]);
    expect(screen.getByTestId("browse-summary").textContent).toContain("Newest first, merged by timestamp across partitions");
  });

  it("shows how much of the range was scanned, of which partitions, within what budget", () => {
    renderWith(page());
    const progress = screen.getByTestId("scan-progress");
    expect(progress.textContent).toContain("Scanned 30 of 120 records in partitions 0–2; at most 10,000 per search.");
    const bar = within(progress).getByRole("progressbar", { name: "Scan progress" });
    expect(bar).toHaveAttribute("value", "30");
    expect(bar).toHaveAttribute("max", "120");
  });

  it("cuts a long value in the table, says so, and shows it whole when the row opens", async () => {
    renderWith(page());
    expect(cells(4)[0]).toContain("5,000 characters: open the row to see all");
    await userEvent.click(within(screen.getByRole("table", { name: "Messages" })).getAllByRole("row")[1]);
    expect(screen.getByTestId("message-value").textContent).toBe(long);
    expect(screen.getByRole("button", { name: "Download value" })).toBeTruthy();
  });

  it("loads older records with the cursor and keeps the pages already shown", async () => {
    renderWith(page(), page({ records: [rec(0, 38, 900)], scanned: 12, cursor: null, reached_end: true }));
    await userEvent.click(screen.getByRole("button", { name: "Load older" }));
    expect(cells(1)).toEqual(["39", "39", "39", "38"]);
    expect(screen.getByTestId("scan-progress").textContent).toContain("Scanned 42 of 120 records");
    expect(screen.getByTestId("scan-progress").textContent).toContain("(all of them)");
    expect(screen.queryByRole("button", { name: "Load older" })).toBeNull();
  });

  it("says when the budget ran out before a match, and offers to scan further", () => {
    renderWith(page({ records: [] }));
    expect(screen.getByText("No match in the records scanned so far.")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Scan further" })).toBeTruthy();
  });

  it("oldest first at the end of every partition: no match, and nothing more to scan", () => {
    renderWith(page({ order: "oldest_first", records: [], cursor: "0:40,1:40,2:40", reached_end: true, scanned: 120 }));
    expect(screen.getByText(/No messages match/)).toBeTruthy();
    expect(screen.getByTestId("scan-progress").textContent).toContain("(all of them)");
    expect(screen.queryByRole("button", { name: "Scan further" })).toBeNull();
  });

  it("names a partition that could not be read", () => {
    const parts = page().partitions.map((p) => (p.partition === 1 ? { ...p, unavailable: "partition 1: no live leader" } : p));
    renderWith(page({ partitions: parts }));
    expect(screen.getByRole("alert").textContent).toBe("partition 1: no live leader");
  });

  it("previews short values whole and long ones cut", () => {
    expect(preview({ a: 1 })).toEqual({ text: '{"a":1}', length: 7, cut: false });
    expect(preview("x".repeat(81)).cut).toBe(true);
    expect(preview(null).text).toBe("(null)");
  });
});
