import { useId, type ReactNode } from "react";

/** A labelled form control with its help and error text wired for screen readers. */
export function Field({
  label,
  help,
  errors,
  children,
}: {
  label: string;
  help?: ReactNode;
  errors?: string[];
  children: (props: { id: string; "aria-describedby"?: string; "aria-invalid"?: boolean }) => ReactNode;
}) {
  const id = useId();
  const describedBy = [help ? `${id}-help` : "", errors?.length ? `${id}-err` : ""].filter(Boolean).join(" ");
  return (
    <div className={"field" + (errors?.length ? " invalid" : "")}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-describedby": describedBy || undefined, "aria-invalid": errors?.length ? true : undefined })}
      {help && (
        <small id={`${id}-help`} className="help">
          {help}
        </small>
      )}
      {errors?.length ? (
        <small id={`${id}-err`} className="field-error" role="alert">
          {errors.join(" ")}
        </small>
      ) : null}
    </div>
  );
}
