import { useState } from "react";
import { atLeast, useMe } from "../api/hooks/auth";
import { useTopicConfigDefinitions, type ConfigDefinition } from "../api/hooks/topicConfigs";
import { useAlterTopicConfigs, type TopicDetail } from "../api/hooks/topics";
import { humanValue } from "../lib/units";
import { ConfigEditor } from "./ConfigEditor";
import { ErrorState, FormError, Loading, fieldErrors } from "./States";

/**
 * A topic's Configs tab: every config with a typed editor, its description and default,
 * whether the topic overrides it, and a reset to the default. The kinds, units and defaults
 * come from the control plane's registry (/api/v1/topic-config-definitions).
 */
export function TopicConfigs({ topic }: { topic: TopicDetail }) {
  const defs = useTopicConfigDefinitions();
  const me = useMe().data;
  const canWrite = atLeast(me?.role, "member");
  const alter = useAlterTopicConfigs(topic.name);
  const reset = useAlterTopicConfigs(topic.name);
  const [edits, setEdits] = useState<Record<string, string | null>>({});
  const [generation, setGeneration] = useState(0); // remounts the editors on discard
  const [overriddenOnly, setOverriddenOnly] = useState(false);
  if (defs.isPending) return <Loading what="config definitions" />;
  if (defs.isError) return <ErrorState error={defs.error} what="config definitions" onRetry={() => defs.refetch()} />;
  const byName: Record<string, ConfigDefinition> = {};
  for (const d of defs.data.configs) byName[d.name] = d;
  const names = Object.keys(topic.effective_configs)
    .filter((k) => byName[k] && (!overriddenOnly || k in topic.configs))
    .sort();
  const changed = Object.keys(edits).filter((k) => edits[k] !== topic.effective_configs[k]);
  const invalid = changed.filter((k) => edits[k] === null);
  const overrides = Object.keys(topic.configs).length;

  function discard() {
    setEdits({});
    setGeneration(generation + 1);
  }
  return (
    <form
      aria-label="Topic configs"
      onSubmit={(e) => {
        e.preventDefault();
        if (invalid.length) return;
        const body: Record<string, string> = {};
        for (const k of changed) body[k] = edits[k] as string;
        alter.mutate(body, { onSuccess: () => setEdits({}) });
      }}
    >
      <div className="toolbar">
        <label>
          <input type="checkbox" checked={overriddenOnly} onChange={(e) => setOverriddenOnly(e.target.checked)} /> Overridden only ({overrides})
        </label>
      </div>
      {names.length === 0 ? (
        <p className="state empty">This topic overrides no config: every value is the default.</p>
      ) : (
        <table className="table compact configs">
          <thead><tr><th>Config</th><th>Value</th><th>Default</th><th>Source</th></tr></thead>
          <tbody>
            {names.map((k) => {
              const def = byName[k];
              const errs = fieldErrors(alter.error, k);
              const local = edits[k] === null ? ["Not a valid value."] : [];
              const allErrs = [...local, ...errs];
              const overridden = k in topic.configs;
              return (
                <tr key={k} className={overridden ? "overridden" : undefined}>
                  <td>
                    <label htmlFor={`cfg-${k}`}><code>{k}</code></label>
                    <small id={`cfg-${k}-help`} className="help">{def.description}</small>
                  </td>
                  <td>
                    {canWrite ? (
                      <ConfigEditor
                        key={generation}
                        def={def}
                        value={topic.effective_configs[k]}
                        id={`cfg-${k}`}
                        describedBy={`cfg-${k}-help` + (allErrs.length ? ` cfg-${k}-error` : "")}
                        invalid={allErrs.length > 0}
                        onChange={(v) => setEdits({ ...edits, [k]: v })}
                      />
                    ) : (
                      <span id={`cfg-${k}`}>{humanValue(topic.effective_configs[k], def.kind, def.special)}</span>
                    )}
                    {allErrs.length > 0 && <small id={`cfg-${k}-error`} className="field-error" role="alert">{allErrs.join(" ")}</small>}
                  </td>
                  <td title={def.default}>{humanValue(def.default, def.kind, def.special)}</td>
                  <td>
                    {overridden ? (
                      <>
                        <span className="badge override">override</span>
                        {canWrite && (
                          <button type="button" className="link" aria-label={`Reset ${k} to default`} disabled={reset.isPending} onClick={() => reset.mutate({ [k]: null }, { onSuccess: () => setEdits((e) => withoutKey(e, k)) })}>
                            Reset to default
                          </button>
                        )}
                      </>
                    ) : "default"}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <FormError error={alter.error} />
      <FormError error={reset.error} />
      {canWrite && (
        <div className="actions">
          <button type="submit" className="primary" disabled={!changed.length || invalid.length > 0 || alter.isPending}>
            {alter.isPending ? "Saving…" : changed.length ? `Save ${changed.length} change${changed.length > 1 ? "s" : ""}` : "No changes"}
          </button>
          {changed.length > 0 && <button type="button" onClick={discard}>Discard</button>}
          {alter.isSuccess && !changed.length && <span role="status">Saved.</span>}
          {reset.isSuccess && <span role="status">Reset to the default.</span>}
        </div>
      )}
    </form>
  );
}

function withoutKey<T>(record: Record<string, T>, key: string): Record<string, T> {
  const out = { ...record };
  delete out[key];
  return out;
}
