import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";
import { describe, expect, it } from "vitest";
import { Overview } from "./Overview";

const NOW = Date.now();
const minute = (ago: number) => new Date(NOW - (NOW % 60_000) - ago * 60_000).toISOString();

function renderOverview(seed: (qc: QueryClient) => void) {
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["brokers"], []);
  qc.setQueryData(["partitions", "*"], {
    ts: new Date(NOW).toISOString(),
    errors: [],
    topics: [{ name: "orders", partitions: [{ partition: 0, leader: 1, replicas: [1], isr: [1], log_start_offset: 0, log_end_offset: 42, high_watermark: 42, under_replicated: false, offline: false }] }],
  });
  seed(qc);
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter>
        <Overview />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("Overview history and sizes", () => {
  it("draws the last minutes from the live series on load, before any live reading", () => {
    renderOverview((qc) => {
      qc.setQueryData(["live", "throughput", ""], {
        measured_from: minute(10),
        as_of: new Date(NOW).toISOString(),
        rows: [{ ts: minute(5), topic: "orders", records_in: 600, bytes_in: 60_000, records_out: 0, bytes_out: 0 }],
        totals: [],
      });
      qc.setQueryData(["reports", "retention"], { rows: [], as_of: null });
    });
    // ten whole minutes measured: in and out drawn from history, messages too
    expect(screen.getByRole("figure", { name: "Bytes in and out per second" }).getAttribute("data-points")).toBe("20");
    expect(screen.getByRole("figure", { name: "Messages in per second" }).getAttribute("data-points")).toBe("10");
    expect(screen.getByTestId("history-as-of").textContent).toMatch(/^Per minute from /);
  });

  it("says sizes are not measured yet instead of 0 B, and labels measured ones with their time", () => {
    const { unmount } = renderOverview((qc) => qc.setQueryData(["reports", "retention"], { rows: [], as_of: null }));
    const table = screen.getByRole("table", { name: "Top topics by size" });
    expect(table.textContent).toContain("not measured yet");
    expect(table.textContent).not.toContain("0 B");
    expect(screen.getByTestId("sizes-as-of").textContent).toMatch(/^Sizes are not measured yet/);
    unmount();
    renderOverview((qc) =>
      qc.setQueryData(["reports", "retention"], {
        as_of: "2025-03-04T10:00:00Z",
        rows: [{ topic: "orders", partition: 0, bytes: 2048, segments: 1, oldest_ts: null, delete_1h_bytes: 0, delete_6h_bytes: 0, delete_24h_bytes: 0, delete_1h_records: 0, delete_6h_records: 0, delete_24h_records: 0 }],
      }),
    );
    const measured = screen.getByRole("table", { name: "Top topics by size" }).textContent;
    expect(measured).toContain("KiB");
    expect(measured).not.toContain("not measured yet");
    expect(screen.getByTestId("sizes-as-of").textContent).toMatch(/^Sizes as of .*2025/);
  });
});
