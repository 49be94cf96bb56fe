import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router-dom";
import { describe, expect, it } from "vitest";
import type { GroupDetail, GroupSummary } from "../api/hooks/groups";
import { GroupDetailPage } from "./GroupDetail";
import { Groups, stateLabel, typeLabel } from "./Groups";

function client() {
  // answers the control plane gave, seeded into the cache; nothing refetches during the test
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["me"], { kind: "user", username: "u", role: "read-only", memberships: [], organisation: { id: "o", slug: "o", name: "O", created_at: "" } });
  return qc;
}

describe("group labels", () => {
  it("words Kafka's states and names the protocol", () => {
    expect(stateLabel("PREPARING_REBALANCE")).toBe("Preparing rebalance");
    expect(stateLabel("COMPLETING_REBALANCE")).toBe("Completing rebalance");
    expect(stateLabel("STABLE")).toBe("Stable");
    expect(typeLabel("classic")).toBe("classic");
    expect(typeLabel("consumer")).toBe("consumer (KIP-848)");
  });
});

describe("Consumer groups page", () => {
  it("lists classic and consumer-protocol groups with their states", () => {
    const qc = client();
    const results: GroupSummary[] = [
      { group_id: "billing", type: "classic", state: "PREPARING_REBALANCE", members: 2, total_lag: 1200, health: "WARN" },
      { group_id: "search", type: "consumer", state: "RECONCILING", members: 3, total_lag: 0, health: "OK" },
    ];
    qc.setQueryData(["groups"], { results });
    render(<QueryClientProvider client={qc}><MemoryRouter><Groups /></MemoryRouter></QueryClientProvider>);
    const rows = within(screen.getByRole("table", { name: "Consumer groups" })).getAllByRole("row").slice(1);
    const cells = rows.map((r) => within(r).getAllByRole("cell").slice(0, 3).map((c) => c.textContent));
    expect(cells).toEqual([
      ["billing", "classic", "Preparing rebalance"],
      ["search", "consumer (KIP-848)", "Reconciling"],
    ]);
  });
});

describe("Group detail page", () => {
  it("shows a classic group's state, protocol and each member's host", () => {
    const qc = client();
    const group: GroupDetail = {
      group_id: "billing", type: "classic", state: "COMPLETING_REBALANCE", coordinator: 2,
      members: [
        { member_id: "rdkafka-1", client_id: "rdkafka", client_host: "10.1.2.3", instance_id: "host-a", assignments: [{ topic: "orders", partition: 0 }] },
        { member_id: "sdk-2", client_id: null, client_host: null, instance_id: null, assignments: [] },
      ],
      offsets: [],
    };
    qc.setQueryData(["groups", "billing"], group);
    render(
      <QueryClientProvider client={qc}>
        <MemoryRouter initialEntries={["/groups/billing"]}>
          <Routes><Route path="/groups/:groupId" element={<GroupDetailPage />} /></Routes>
        </MemoryRouter>
      </QueryClientProvider>,
    );
    expect(screen.getByText(/Completing rebalance · classic protocol · coordinator 2 · 2 members/)).toBeTruthy();
    const rows = within(screen.getByRole("table", { name: "Members" })).getAllByRole("row").slice(1);
    expect(rows.map((r) => within(r).getAllByRole("cell").map((c) => c.textContent))).toEqual([
      ["rdkafka-1", "rdkafka", "10.1.2.3", "host-a", "orders: 0"],
      ["sdk-2", "—", "—", "—", "none"],
    ]);
  });
});
