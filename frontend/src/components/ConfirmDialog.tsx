import { useEffect, useRef, useState } from "react";

/** A modal confirmation; with `typeToConfirm` the person types a name to enable the button. */
export function ConfirmDialog({
  title,
  body,
  confirmLabel,
  typeToConfirm,
  busy,
  onConfirm,
  onCancel,
}: {
  title: string;
  body: string;
  confirmLabel: string;
  typeToConfirm?: string;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const [typed, setTyped] = useState("");
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) {
      if (typeof d.showModal === "function") d.showModal();
      else d.setAttribute("open", "");
    }
  }, []);
  const ok = !typeToConfirm || typed === typeToConfirm;
  return (
    <dialog ref={ref} className="dialog" aria-labelledby="confirm-title" onCancel={onCancel}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (ok) onConfirm();
        }}
      >
        <h2 id="confirm-title">{title}</h2>
        <p>{body}</p>
        {typeToConfirm && (
          <label>
            Type <code>{typeToConfirm}</code> to confirm
            <input autoFocus value={typed} onChange={(e) => setTyped(e.target.value)} aria-label="confirmation" />
          </label>
        )}
        <div className="actions">
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
          <button type="submit" className="danger" disabled={!ok || busy}>
            {busy ? "Working…" : confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}
