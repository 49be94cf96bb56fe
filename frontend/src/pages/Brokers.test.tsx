import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Broker } from "../api/hooks/brokers";
import { Brokers } from "./Brokers";

const at = "2026-11-26T10:00:00Z";
const GiB = 1024 ** 3;

function broker(id: number, kafka: string | null, over: Partial<Broker> = {}): Broker {
  return {
    broker_id: id, url: `http://127.0.0.1:900${id}`, kafka, live: true,
    last_heartbeat_at: at, registered_at: at, metadata_version: 7, leader_partitions: id,
    partitions: 12, leaders: 4, under_replicated: 0, out_of_isr: 0, your_under_replicated: [],
    info: {
      version: "0.1.0", started_at_ms: Date.parse(at), uptime_s: 5400,
      log_dirs: [{ path: `/var/sluice/broker-${id}`, log_bytes: 3 * 1024 * 1024, free_bytes: 40 * GiB, total_bytes: 100 * GiB }],
      hosted_partitions: 12, configs: { fsync: true, max_request_bytes: 16777216, http_front: "fast" },
    },
    info_error: null,
    ...over,
  };
}

function renderWith(brokers: Broker[]) {
  // the control plane's answer, seeded into the cache; nothing refetches during the test
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["brokers"], brokers);
  return render(<QueryClientProvider client={qc}><Brokers /></QueryClientProvider>);
}

function column(name: string): string[] {
  const table = screen.getByRole("table", { name: "Brokers" });
  const headers = within(table).getAllByRole("columnheader").map((h) => h.textContent);
  const i = headers.indexOf(name);
  expect(i).toBeGreaterThanOrEqual(0);
  return within(table).getAllByRole("row").slice(1).map((r) => within(r).getAllByRole("cell")[i].textContent ?? "");
}

describe("Brokers page", () => {
  it("shows each broker's Kafka listener, and none for a broker without one", () => {
    renderWith([broker(1, "127.0.0.1:29092"), broker(2, null)]);
    expect(column("Kafka listener")).toEqual(["127.0.0.1:29092", "none"]);
    expect(screen.getByText(/SASL\/PLAIN: the API key id as the user name/)).toBeTruthy();
  });

  it("says nothing of Kafka when no broker listens for it", () => {
    renderWith([broker(1, null)]);
    expect(screen.queryByText(/SASL\/PLAIN/)).toBeNull();
    expect(column("Kafka listener")).toEqual(["none"]);
  });

  it("shows version, uptime, disk, counts, log directories and settings of a broker that answered", () => {
    renderWith([broker(1, null, { under_replicated: 2, your_under_replicated: [{ topic: "orders", partition: 3 }] })]);
    expect(column("Status")).toEqual(["up"]);
    expect(column("Version")).toEqual(["0.1.0"]);
    expect(column("Uptime")).toEqual(["1.5 h"]);
    expect(column("Partitions")).toEqual(["12"]);
    expect(column("Leaders")).toEqual(["4"]);
    expect(column("Under-replicated")).toEqual(["2"]);
    expect(column("Disk")).toEqual(["3.0 MiB in logs, 40.0 GiB free"]);
    const dirs = screen.getByRole("table", { name: "Log directories of broker 1" });
    expect(within(dirs).getByText("/var/sluice/broker-1")).toBeTruthy();
    expect(within(dirs).getByText("100.0 GiB")).toBeTruthy();
    const settings = screen.getByRole("table", { name: "Settings of broker 1" });
    expect(within(settings).getByText("max_request_bytes")).toBeTruthy();
    expect(within(settings).getByText("16777216")).toBeTruthy();
    expect(screen.getByText(/Your under-replicated partitions it leads: orders-3/)).toBeTruthy();
  });

  it("says down or unreachable instead of zeros when a broker cannot describe itself", () => {
    renderWith([
      broker(1, null, { live: false, info: null, info_error: "down: no heartbeat within the session timeout" }),
      broker(2, null, { info: null, info_error: "unreachable: cannot reach http://127.0.0.1:9002" }),
    ]);
    expect(column("Status")).toEqual(["down", "unreachable"]);
    expect(column("Version")).toEqual(["down", "unreachable"]);
    expect(column("Uptime")).toEqual(["down", "unreachable"]);
    expect(column("Disk")).toEqual(["down", "unreachable"]);
    expect(column("Partitions")).toEqual(["12", "12"]); // the controller's table still knows
    expect(screen.getByText(/Broker 2 is unreachable: cannot reach/)).toBeTruthy();
    expect(screen.queryByRole("table", { name: "Log directories of broker 1" })).toBeNull();
    expect(screen.queryByText(/0 B/)).toBeNull();
  });

  it("says free space is not measured when the file system could not be read", () => {
    const b = broker(1, null);
    b.info!.log_dirs[0].free_bytes = null;
    b.info!.log_dirs[0].total_bytes = null;
    renderWith([b]);
    expect(column("Disk")).toEqual(["3.0 MiB in logs, free not measured"]);
    const dirs = screen.getByRole("table", { name: "Log directories of broker 1" });
    expect(within(dirs).getAllByText("not measured")).toHaveLength(2);
  });

  it("keeps a broker's row short enough for one line at 1366 px: address without http://, heartbeat as an age", () => {
    const b = broker(1, null, { last_heartbeat_at: new Date(Date.now() - 90_000).toISOString() });
    renderWith([b, broker(2, null, { url: "https://broker-2.example:8443" })]);
    expect(column("Address")).toEqual(["127.0.0.1:9001", "https://broker-2.example:8443"]);
    expect(column("Last heartbeat")[0]).toMatch(/^1\.5 min ago$/);
    const cell = within(screen.getByRole("table", { name: "Brokers" })).getByText(/min ago/);
    expect(cell.title).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  });

  it("tells people how to start a broker when none registered", () => {
    renderWith([]);
    expect(screen.getByText(/No broker has registered yet/)).toBeTruthy();
  });
});
