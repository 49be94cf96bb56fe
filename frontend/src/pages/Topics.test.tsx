import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";
import { describe, expect, it } from "vitest";
import { Topics } from "./Topics";

const topic = {
  topic_id: "4f1c", name: "orders", partitions: 3, replication_factor: 3,
  configs: { "retention.ms": "3600000" }, created_at: null, updated_at: null, validate_only: false,
};

function renderAs(role: string) {
  // answers the control plane gave, seeded into the cache; nothing refetches during the test
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["me"], { kind: "user", username: "u", role, memberships: [], organisation: { id: "o", slug: "o", name: "O", created_at: "" } });
  qc.setQueryData(["topics"], [topic]);
  qc.setQueryData(["partitions", "*"], { ts: new Date().toISOString(), errors: [], topics: [] });
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter>
        <Topics />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("Topics page and roles", () => {
  it("shows read-only users no create or delete actions", () => {
    renderAs("read-only");
    expect(screen.getByRole("link", { name: "orders" })).toBeTruthy();
    expect(screen.getByText("1.0 h")).toBeTruthy();
    expect(screen.queryByRole("button", { name: "New topic" })).toBeNull();
    expect(screen.queryByRole("button", { name: "Delete orders" })).toBeNull();
  });

  it("shows members the actions", () => {
    renderAs("member");
    expect(screen.getByRole("button", { name: "New topic" })).toBeTruthy();
    expect(screen.getByRole("button", { name: "Delete orders" })).toBeTruthy();
  });
});
