// Invitations to join other organisations: nobody becomes a member without saying yes.
import type { MyInvitation } from "../api/hooks/invitations";
import { errorText } from "./States";

export function InvitationList({
  invitations,
  onAnswer,
  busy = false,
  error,
}: {
  invitations: MyInvitation[];
  onAnswer: (id: string, accept: boolean) => void;
  busy?: boolean;
  error?: unknown;
}) {
  if (invitations.length === 0) return null;
  return (
    <section className="state empty" aria-label="Invitations">
      {error != null && <p role="alert">{errorText(error)}</p>}
      <ul>
        {invitations.map((inv) => (
          <li key={inv.id}>
            <strong>{inv.organisation.name}</strong> invites you as {inv.role}.{" "}
            <button type="button" disabled={busy} onClick={() => onAnswer(inv.id, true)}>
              Accept
            </button>{" "}
            <button type="button" className="link" disabled={busy} onClick={() => onAnswer(inv.id, false)}>
              Decline
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
