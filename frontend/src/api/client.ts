// The one place the console talks HTTP: an openapi-fetch client typed from the control
// plane's schema (schema.d.ts, generated from backend/openapi.yaml). Components never call
// fetch: they use the hooks in ./hooks, one module per resource, all over this client.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];

/** A refusal from the API, in its one error shape ({error_code, message, fields?}). */
export class ApiError extends Error {
  status: number;
  code: string;
  fields: Record<string, string[]>;

  constructor(status: number, code: string, message: string, fields?: Record<string, unknown>) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = {};
    for (const [k, v] of Object.entries(fields ?? {})) {
      this.fields[k] = Array.isArray(v) ? v.map(String) : [typeof v === "string" ? v : JSON.stringify(v)];
    }
  }
}

export function csrfToken(): string {
  const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

const csrf: Middleware = {
  onRequest({ request }) {
    if (!["GET", "HEAD", "OPTIONS"].includes(request.method)) {
      request.headers.set("X-CSRFToken", csrfToken());
    }
    return request;
  },
};

export const client = createClient<paths>({ baseUrl: "", credentials: "same-origin" });
client.use(csrf);

export function toApiError(status: number, body: unknown): ApiError {
  if (body && typeof body === "object" && "error_code" in body) {
    const b = body as { error_code: string; message?: string; fields?: Record<string, unknown> };
    return new ApiError(status, b.error_code, b.message || b.error_code, b.fields);
  }
  if (status === 0) return new ApiError(0, "NETWORK", "The control plane cannot be reached. Check your connection.");
  return new ApiError(status, "HTTP_" + status, `The control plane answered ${status}.`);
}

/** Unwraps an openapi-fetch answer: the data, or throws ApiError. */
export async function unwrap<T>(
  p: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let answer;
  try {
    answer = await p;
  } catch {
    throw toApiError(0, null);
  }
  const { data, error, response } = answer;
  if (!response.ok || error !== undefined) throw toApiError(response.status, error);
  return data as T;
}

export function isNotFound(e: unknown): boolean {
  return e instanceof ApiError && e.status === 404;
}
