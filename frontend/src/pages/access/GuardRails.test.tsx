import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import type { ReactNode } from "react";
import { describe, expect, it } from "vitest";
import type { Quota } from "../../api/hooks/quotas";
import type { ServiceAccount } from "../../api/hooks/serviceAccounts";
import { Quotas } from "./Quotas";
import { ServiceAccounts } from "./ServiceAccounts";

const at = "2026-11-26T10:00:00Z";
const REASON = "the web console reads and produces through this account";

function renderWith(data: Record<string, unknown>, page: ReactNode) {
  // the control plane's answers, seeded into the cache; nothing refetches during the test
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["me"], { kind: "user", username: "owner", service_account_id: null, is_staff: false, organisation: null, role: "owner", memberships: [] });
  for (const [key, value] of Object.entries(data)) qc.setQueryData([key], value);
  return render(<QueryClientProvider client={qc}>{page}</QueryClientProvider>);
}

function account(name: string, protectedReason: string | null): ServiceAccount {
  return { id: `id-${name}`, name, principal: `User:${name}`, description: "", role: "member", is_active: true, created_at: at, protected: protectedReason };
}

function quota(over: Partial<Quota>): Quota {
  return {
    id: "q1", scope: "organisation", service_account_id: null, produce_bytes_per_sec: null, fetch_bytes_per_sec: null,
    request_rate: null, storage_bytes: null, max_topics: null, max_partitions: null, max_connections: null,
    max_consumer_instances: null, max_streams: null, updated_at: at, ...over,
  };
}

describe("service accounts", () => {
  it("disables delete and deactivate of the console's own account, with the reason", () => {
    renderWith({ "service-accounts": [account("sluice-console", REASON), account("orders-app", null)] }, <ServiceAccounts />);
    const rows = within(screen.getByRole("table", { name: "Service accounts" })).getAllByRole("row").slice(1);
    const [console, other] = rows;
    const del = within(console).getByRole("button", { name: "Delete" }) as HTMLButtonElement;
    const deactivate = within(console).getByRole("button", { name: "Deactivate" }) as HTMLButtonElement;
    expect(del.disabled && deactivate.disabled).toBe(true);
    expect(del.title).toBe(`Cannot be deleted: ${REASON}`);
    expect(within(console).getByRole("note").textContent).toContain(REASON);
    expect((within(other).getByRole("button", { name: "Delete" }) as HTMLButtonElement).disabled).toBe(false);
    expect((within(other).getByRole("button", { name: "Deactivate" }) as HTMLButtonElement).disabled).toBe(false);
  });
});

describe("quotas", () => {
  it("shows the organisation's usage beside its limits, and not measured instead of 0", () => {
    renderWith({
      quotas: [
        quota({ max_topics: 2, max_partitions: 100, storage_bytes: 1024 ** 3, usage: { topics: 2, partitions: 6, storage_bytes: null, storage_partial: false } }),
        quota({ id: "q2", scope: "service_account", service_account_id: "id-orders-app", produce_bytes_per_sec: 1000, usage: null }),
      ],
      "service-accounts": [account("orders-app", null)],
    }, <Quotas />);
    const rows = within(screen.getByRole("table", { name: "Quotas" })).getAllByRole("row");
    const headers = within(rows[0]).getAllByRole("columnheader").map((h) => h.textContent);
    const cell = (row: number, name: string) => within(rows[row]).getAllByRole("cell")[headers.indexOf(name)].textContent;
    expect(cell(1, "Topics")).toBe("22 used at the limit");
    expect(cell(1, "Partitions")).toBe("1006 used");
    expect(cell(1, "Storage")).toBe("1.0 GiBnot measured yet");
    expect(cell(2, "Topics")).toBe("unlimited"); // an account's row: not measured per account
  });
});
