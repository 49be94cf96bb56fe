// Loading, error and empty states, written for people.
import type { ReactNode } from "react";
import { ApiError } from "../api/client";

export function Loading({ what }: { what: string }) {
  return (
    <p className="state loading" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.status === 0) return error.message;
    if (error.status === 401) return "Your session has ended. Sign in again.";
    if (error.status === 403) return `Not allowed: ${error.message}`;
    return error.message;
  }
  return "Something went wrong. Try again in a moment.";
}

export function ErrorState({ error, what, onRetry }: { error: unknown; what: string; onRetry?: () => void }) {
  return (
    <div className="state error" role="alert">
      <strong>Could not load {what}.</strong> <span>{errorText(error)}</span>
      {onRetry && (
        <button type="button" className="link" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="state empty">{children}</div>;
}

export function NotAvailable({ feature, detail }: { feature: string; detail?: string }) {
  return (
    <div className="state empty" data-testid="not-available">
      <strong>{feature} are not available on this control plane yet.</strong>{" "}
      {detail ?? "This page fills in once that part of Sluice is deployed."}
    </div>
  );
}

export function FormError({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="form-error" role="alert">
      {errorText(error)}
    </p>
  );
}

export function fieldErrors(error: unknown, field: string): string[] {
  return error instanceof ApiError ? (error.fields[field] ?? []) : [];
}
