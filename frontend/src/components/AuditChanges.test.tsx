import { render, screen, within } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";
import { describe, expect, it } from "vitest";
import type { Schemas } from "../api/client";
import { AuditChanges, AuditObject, changeSummary } from "./AuditChanges";

const event = (e: Partial<Schemas["AuditEventOutput"]>): Schemas["AuditEventOutput"] => ({
  id: 1, created_at: "2026-01-01T00:00:00Z", actor: "user:u", api_key_id: "", action: "topic.alter_configs",
  object_type: "topic", object_id: "0b6c1f7e-uuid", ip: null, user_agent: "", before: null, after: null,
  object_name: "orders", changes: [], ...e,
});

describe("audit log names and changes", () => {
  it("names a topic instead of its UUID and links it; a deleted one is not linked", () => {
    render(<MemoryRouter><AuditObject event={event({})} /><AuditObject event={event({ id: 2, action: "topic.delete", object_name: "gone" })} /></MemoryRouter>);
    expect(screen.getByRole("link", { name: "orders" }).getAttribute("href")).toBe("/topics/orders");
    expect(screen.queryByText("0b6c1f7e-uuid")).toBeNull();
    expect(screen.getAllByTitle("topic 0b6c1f7e-uuid")).toHaveLength(2);
    expect(screen.queryByRole("link", { name: "gone" })).toBeNull();
  });

  it("links a group by its id", () => {
    render(<MemoryRouter><AuditObject event={event({ action: "group.reset_offsets", object_type: "group", object_id: "billing", object_name: "billing" })} /></MemoryRouter>);
    expect(screen.getByRole("link", { name: "billing" }).getAttribute("href")).toBe("/groups/billing");
  });

  it("says what changed, in a line and field by field", () => {
    const changes = [
      { field: "configs.retention.ms", before: "3600000", after: "60000" },
      { field: "configs.cleanup.policy", before: null, after: "compact" },
      { field: "partitions", before: 1, after: 2 },
    ];
    expect(changeSummary(changes)).toBe("retention.ms 3600000 → 60000; cleanup.policy — → compact; 1 more");
    render(<AuditChanges changes={changes} />);
    const rows = within(screen.getByRole("table", { name: "Changes" })).getAllByRole("row").slice(1);
    expect(rows.map((r) => within(r).getAllByRole("cell").map((c) => c.textContent))).toEqual([
      ["configs.retention.ms", "3600000", "60000"],
      ["configs.cleanup.policy", "—", "compact"],
      ["partitions", "1", "2"],
    ]);
  });
});
