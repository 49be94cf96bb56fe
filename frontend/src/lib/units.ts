// Kafka config values (strings of milliseconds or bytes) <-> an amount in a human unit, for
// the typed config editors. Values beyond 2^53 (Kafka's Long.MAX_VALUE "never") stay strings.

export interface Unit {
  label: string;
  factor: number;
}

export const DURATION_UNITS: Unit[] = [
  { label: "ms", factor: 1 },
  { label: "seconds", factor: 1000 },
  { label: "minutes", factor: 60_000 },
  { label: "hours", factor: 3_600_000 },
  { label: "days", factor: 86_400_000 },
];

export const SIZE_UNITS: Unit[] = [
  { label: "bytes", factor: 1 },
  { label: "KiB", factor: 1024 },
  { label: "MiB", factor: 1024 ** 2 },
  { label: "GiB", factor: 1024 ** 3 },
];

/** The largest unit that shows `value` as a whole number: "604800000" -> 7 days. */
export function toAmount(value: string, units: Unit[]): { amount: string; unit: string } {
  const n = Number(value);
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n) || n === 0) return { amount: value, unit: units[0].label };
  for (const u of [...units].reverse()) {
    if (n % u.factor === 0) return { amount: String(n / u.factor), unit: u.label };
  }
  return { amount: value, unit: units[0].label };
}

/** An amount in a unit back to Kafka's string; null when it is not a whole number of the base unit. */
export function fromAmount(amount: string, unit: string, units: Unit[]): string | null {
  const u = units.find((x) => x.label === unit) ?? units[0];
  const text = amount.trim();
  if (!/^-?\d+(\.\d+)?$/.test(text)) return null;
  if (/^-?\d+$/.test(text)) return (BigInt(text) * BigInt(u.factor)).toString();
  const v = Number(text) * u.factor;
  return Number.isInteger(v) ? String(v) : null;
}

/** A value for reading: "7 days", "1 GiB", "no limit" (its special meaning), or as is. */
export function humanValue(value: string, kind: string, special: Record<string, string> = {}): string {
  if (value in special) return special[value];
  const units = kind === "duration" ? DURATION_UNITS : kind === "size" ? SIZE_UNITS : null;
  if (!units) return value;
  const { amount, unit } = toAmount(value, units);
  return amount === "1" ? `1 ${unit.replace(/s$/, "")}` : `${amount} ${unit}`;
}
