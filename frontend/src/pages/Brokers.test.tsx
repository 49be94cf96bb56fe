import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Broker } from "../api/hooks/brokers";
import { Brokers } from "./Brokers";

const at = "2026-11-26T10:00:00Z";

function broker(id: number, kafka: string | null): Broker {
  return {
    broker_id: id, url: `http://127.0.0.1:900${id}`, kafka, live: true,
    last_heartbeat_at: at, registered_at: at, metadata_version: 7, leader_partitions: id,
  };
}

function renderWith(brokers: Broker[]) {
  // the control plane's answer, seeded into the cache; nothing refetches during the test
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["brokers"], brokers);
  return render(<QueryClientProvider client={qc}><Brokers /></QueryClientProvider>);
}

describe("Brokers page", () => {
  it("shows each broker's Kafka listener, and none for a broker without one", () => {
    renderWith([broker(1, "127.0.0.1:29092"), broker(2, null)]);
    const table = screen.getByRole("table", { name: "Brokers" });
    const headers = within(table).getAllByRole("columnheader").map((h) => h.textContent);
    const column = headers.indexOf("Kafka listener");
    expect(column).toBeGreaterThan(0);
    const rows = within(table).getAllByRole("row").slice(1);
    expect(rows.map((r) => within(r).getAllByRole("cell")[column].textContent)).toEqual(["127.0.0.1:29092", "none"]);
    expect(screen.getByText(/SASL\/PLAIN: the API key id as the user name/)).toBeTruthy();
  });

  it("says nothing of Kafka when no broker listens for it", () => {
    renderWith([broker(1, null)]);
    expect(screen.queryByText(/SASL\/PLAIN/)).toBeNull();
    expect(screen.getByText("none")).toBeTruthy();
  });
});
