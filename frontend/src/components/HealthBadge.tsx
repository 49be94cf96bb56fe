import type { GroupHealth } from "../api/hooks/groups";

/** What each consumer-group health means (Burrow's names; the coordinator decides them from
 * members, lag and how old the next unread record is: docs/consumer-groups.md, "Lag"). */
export const HEALTH_MEANING: Record<GroupHealth, string> = {
  OK: "members are consuming; the next unread record is under 10 s old",
  WARN: "members are consuming, but the next unread record is 10 s or older",
  ERR: "members are consuming, but the next unread record is a minute or older",
  STALL: "members have lag and the next unread record is 5 minutes or older: they may be stuck",
  STOP: "no members, and records are waiting: nothing is consuming this group's lag",
  EMPTY: "no members and no lag",
};

/** A group's health as a badge whose meaning shows on hover and is read by screen readers. */
export function HealthBadge({ health }: { health: GroupHealth }) {
  return (
    <span className={`badge ${health}`} title={`${health}: ${HEALTH_MEANING[health]}`}>
      {health}
      <span className="sr-only">: {HEALTH_MEANING[health]}</span>
    </span>
  );
}

/** The badges explained, under a table that shows them. */
export function HealthLegend({ only }: { only?: GroupHealth[] }) {
  const shown = (Object.keys(HEALTH_MEANING) as GroupHealth[]).filter((h) => !only || only.includes(h));
  return (
    <ul className="legend" aria-label="Health badges">
      {shown.map((h) => (
        <li key={h}><span className={`badge ${h}`} aria-hidden="true">{h}</span> {HEALTH_MEANING[h]}</li>
      ))}
    </ul>
  );
}
