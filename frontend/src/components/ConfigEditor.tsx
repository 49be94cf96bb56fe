import { useEffect, useState } from "react";
import type { ConfigDefinition } from "../api/hooks/topicConfigs";
import { DURATION_UNITS, SIZE_UNITS, fromAmount, toAmount } from "../lib/units";

/**
 * One topic config's editor, chosen by its kind: a choice list for enums, a switch for
 * booleans, an amount and a unit for durations and sizes, a number otherwise. Values with a
 * meaning of their own (-1: no limit) are offered by name. `value` is the saved value the
 * editor starts from (a new one, after a save or a reset, replaces what is shown); `onChange`
 * gets Kafka's string, or null while the input is not a valid value yet.
 */
export function ConfigEditor({
  def,
  value,
  onChange,
  id,
  describedBy,
  invalid,
}: {
  def: ConfigDefinition;
  value: string;
  onChange: (value: string | null) => void;
  id: string;
  describedBy?: string;
  invalid?: boolean;
}) {
  const aria = { "aria-describedby": describedBy, "aria-invalid": invalid || undefined };
  if (def.kind === "enum" || def.kind === "boolean") {
    return <ChoiceEditor def={def} value={value} onChange={onChange} id={id} aria={aria} />;
  }
  return <AmountEditor def={def} value={value} onChange={onChange} id={id} aria={aria} />;
}

interface EditorProps {
  def: ConfigDefinition;
  value: string;
  onChange: (value: string | null) => void;
  id: string;
  aria: Record<string, unknown>;
}

function ChoiceEditor({ def, value, onChange, id, aria }: EditorProps) {
  const [chosen, setChosen] = useState(value);
  useEffect(() => setChosen(value), [value]);
  const choose = (v: string) => {
    setChosen(v);
    onChange(v);
  };
  if (def.kind === "boolean") {
    return (
      <label className="switch">
        <input id={id} {...aria} type="checkbox" role="switch" checked={chosen === "true"} onChange={(e) => choose(e.target.checked ? "true" : "false")} />
        <span>{chosen === "true" ? "on" : "off"}</span>
      </label>
    );
  }
  return (
    <select id={id} {...aria} value={chosen} onChange={(e) => choose(e.target.value)}>
      {def.choices.map((c) => <option key={c} value={c}>{c}</option>)}
    </select>
  );
}

function AmountEditor({ def, value, onChange, id, aria }: EditorProps) {
  const units = def.kind === "duration" ? DURATION_UNITS : def.kind === "size" ? SIZE_UNITS : null;
  const specials = Object.entries(def.special);
  const split = (v: string) => (v in def.special ? { amount: "", unit: `special:${v}` } : units ? toAmount(v, units) : { amount: v, unit: "" });
  const [state, setState] = useState(split(value));
  useEffect(() => setState(split(value)), [value]); // eslint-disable-line react-hooks/exhaustive-deps

  function update(amount: string, unit: string) {
    setState({ amount, unit });
    if (unit.startsWith("special:")) return onChange(unit.slice("special:".length));
    if (units) return onChange(fromAmount(amount, unit, units));
    const text = amount.trim();
    const ok = def.kind === "ratio" ? /^\d+(\.\d+)?$/.test(text) : /^-?\d+$/.test(text);
    onChange(ok ? text : null);
  }
  const special = state.unit.startsWith("special:");
  const unitLabel = def.unit && !units ? def.unit : null;
  return (
    <span className="amount">
      <input
        id={id}
        {...aria}
        inputMode={def.kind === "ratio" ? "decimal" : "numeric"}
        value={special ? "" : state.amount}
        disabled={special}
        placeholder={special ? def.special[state.unit.slice(8)] : undefined}
        onChange={(e) => update(e.target.value, state.unit)}
      />
      {(units || specials.length > 0) && (
        <select
          aria-label={`${def.name} unit`}
          value={state.unit}
          onChange={(e) => {
            const unit = e.target.value;
            const amount = special && !unit.startsWith("special:") ? "1" : state.amount;
            update(amount, unit);
          }}
        >
          {(units ?? [{ label: unitLabel ?? "", factor: 1 }]).map((u) => <option key={u.label} value={u.label}>{u.label || "value"}</option>)}
          {specials.map(([v, meaning]) => <option key={v} value={`special:${v}`}>{meaning}</option>)}
        </select>
      )}
      {unitLabel && !specials.length && <span className="muted"> {unitLabel}</span>}
    </span>
  );
}
