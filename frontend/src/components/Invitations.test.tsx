import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { MyInvitation } from "../api/hooks/invitations";
import { InvitationList } from "./Invitations";

const invitation: MyInvitation = {
  id: "4f6c1e9a-0000-4000-8000-000000000001",
  organisation: { id: "4f6c1e9a-0000-4000-8000-000000000002", slug: "alpha", name: "Alpha", created_at: "2026-01-01T00:00:00Z" },
  role: "read-only",
  invited_by: "user:alpha-admin",
  created_at: "2026-01-01T00:00:00Z",
  expires_at: "2026-01-08T00:00:00Z",
};

describe("InvitationList", () => {
  it("offers to accept or decline each invitation", async () => {
    const onAnswer = vi.fn();
    render(<InvitationList invitations={[invitation]} onAnswer={onAnswer} />);
    expect(screen.getByText("Alpha")).toBeTruthy();
    await userEvent.click(screen.getByRole("button", { name: "Accept" }));
    expect(onAnswer).toHaveBeenCalledWith(invitation.id, true);
    await userEvent.click(screen.getByRole("button", { name: "Decline" }));
    expect(onAnswer).toHaveBeenCalledWith(invitation.id, false);
  });

  it("shows nothing without invitations", () => {
    const { container } = render(<InvitationList invitations={[]} onAnswer={() => {}} />);
    expect(container.textContent).toBe("");
  });
});
