import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { LiveLag } from "../api/hooks/live";
import { GroupLagChart } from "./GroupLagChart";

function renderWith(data: LiveLag) {
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["live", "lag", "billing"], data);
  return render(
    <QueryClientProvider client={qc}>
      <GroupLagChart groupId="billing" />
    </QueryClientProvider>,
  );
}

const row = (ts: string, topic: string, offset_lag: number | null) => ({ ts, group_id: "billing", topic, offset_lag, partitions: 1, measured: offset_lag === null ? 0 : 1 });

describe("GroupLagChart", () => {
  it("says lag is not measured yet, not 0, before the first sample", () => {
    renderWith({ as_of: null, measured_from: null, rows: [], current: [], partitions: [] });
    expect(screen.getByTestId("lag-as-of").textContent).toBe("Lag history is not measured yet.");
    expect(screen.getByTestId("chart-empty").textContent).toMatch(/^Not measured yet/);
    expect(screen.queryByRole("figure")).toBeNull();
  });

  it("draws the history it is given on load, with its time, topics carried forward into the total", () => {
    renderWith({
      as_of: "2025-03-04T10:02:10Z",
      measured_from: "2025-03-04T10:00:00Z",
      rows: [row("2025-03-04T10:00:00Z", "orders", 5), row("2025-03-04T10:01:00Z", "refunds", 2), row("2025-03-04T10:02:00Z", "orders", 7)],
      current: [],
      partitions: [],
    });
    expect(screen.getByTestId("lag-as-of").textContent).toMatch(/as of .*2025/);
    const fig = screen.getByRole("figure", { name: "Lag over time" });
    // total (3 points: 5, 7, 9) + orders (2) + refunds (1)
    expect(fig.getAttribute("data-points")).toBe("6");
  });
});
