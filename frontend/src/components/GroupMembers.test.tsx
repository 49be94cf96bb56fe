import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router-dom";
import { describe, expect, it } from "vitest";
import type { GroupMember } from "../api/hooks/groups";
import { GroupDelete } from "./GroupDelete";
import { GroupMembers } from "./GroupMembers";
import { HEALTH_MEANING, HealthBadge, HealthLegend } from "./HealthBadge";

const member = (id: string, assignments: [string, number][], extra: Partial<GroupMember> = {}): GroupMember => ({
  member_id: id, client_id: `${id}-client`, client_host: "10.0.0.9", instance_id: null,
  assignments: assignments.map(([topic, partition]) => ({ topic, partition })), ...extra,
});

describe("GroupMembers", () => {
  it("lists each member's client id, host and partitions by topic, with topic links", () => {
    render(
      <MemoryRouter>
        <GroupMembers members={[member("m1", [["orders", 2], ["audit", 0], ["orders", 0]]), member("m2", [], { client_host: null })]} />
      </MemoryRouter>,
    );
    const rows = within(screen.getByRole("table", { name: "Members" })).getAllByRole("row").slice(1);
    expect(rows.map((r) => within(r).getAllByRole("cell").map((c) => c.textContent))).toEqual([
      ["m1", "m1-client", "10.0.0.9", "—", "audit: 0; orders: 0, 2"],
      ["m2", "m2-client", "—", "—", "none"],
    ]);
    expect(within(rows[0]).getByRole("link", { name: "orders" }).getAttribute("href")).toBe("/topics/orders");
    expect(screen.getByText("3 partitions assigned across 2 members.")).toBeTruthy();
  });

  it("says when the group has no members", () => {
    render(<MemoryRouter><GroupMembers members={[]} /></MemoryRouter>);
    expect(screen.getByText(/No active members/)).toBeTruthy();
  });
});

describe("GroupDelete", () => {
  function setup(members: number) {
    const qc = new QueryClient();
    render(<QueryClientProvider client={qc}><MemoryRouter><GroupDelete groupId="g1" members={members} /></MemoryRouter></QueryClientProvider>);
  }

  it("is disabled with the reason while the group has members", () => {
    setup(2);
    expect(screen.getByRole("button", { name: "Delete group" })).toHaveProperty("disabled", true);
    expect(screen.getByText(/has 2 active members\. Stop its consumers first/)).toBeTruthy();
  });

  it("asks for the group's name before deleting an empty group", async () => {
    setup(0);
    await userEvent.click(screen.getByRole("button", { name: "Delete group" }));
    const dialog = screen.getByRole("dialog");
    const confirm = within(dialog).getByRole("button", { name: "Delete group" });
    expect(confirm).toHaveProperty("disabled", true);
    await userEvent.type(within(dialog).getByLabelText("confirmation"), "g1");
    expect(confirm).toHaveProperty("disabled", false);
    await userEvent.click(within(dialog).getByRole("button", { name: "Cancel" }));
    expect(screen.queryByRole("dialog")).toBeNull();
  });
});

describe("HealthBadge", () => {
  it("explains itself on hover, to screen readers, and in the legend", () => {
    render(<><HealthBadge health="STALL" /><HealthLegend only={["STOP", "STALL"]} /></>);
    expect(screen.getByTitle(`STALL: ${HEALTH_MEANING.STALL}`)).toBeTruthy();
    const legend = screen.getByRole("list", { name: "Health badges" });
    expect(within(legend).getAllByRole("listitem").map((li) => li.textContent)).toEqual([
      `STALL ${HEALTH_MEANING.STALL}`,
      `STOP ${HEALTH_MEANING.STOP}`,
    ]);
  });
});
