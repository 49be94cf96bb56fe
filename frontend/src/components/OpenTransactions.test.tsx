import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { PartitionState } from "../api/hooks/partitions";
import { OpenTransactions } from "./OpenTransactions";

function partition(n: number, open: PartitionState["open_transactions"]): PartitionState {
  return {
    partition: n,
    leader: 1,
    leader_epoch: 0,
    replicas: [1],
    isr: [1],
    offline: false,
    under_replicated: false,
    log_start_offset: 0,
    log_end_offset: 10,
    high_watermark: 10,
    last_stable_offset: open.length ? Math.min(...open.map((t) => t.first_offset)) : 10,
    open_transactions: open,
  };
}

describe("OpenTransactions", () => {
  it("lists every partition's open transactions, longest open first", () => {
    render(
      <OpenTransactions
        partitions={[
          partition(0, [{ producer_id: 7, producer_epoch: 2, first_offset: 4, started_ms: 1_700_000_000_000, open_ms: 1500 }]),
          partition(1, []),
          partition(2, [{ producer_id: 9, producer_epoch: 0, first_offset: 1234, started_ms: null, open_ms: null },
            { producer_id: 8, producer_epoch: 5, first_offset: 3, started_ms: 1_699_999_880_000, open_ms: 125_000 }]),
        ]}
      />,
    );
    const rows = within(screen.getByRole("table", { name: "Open transactions" })).getAllByRole("row").slice(1);
    const cells = rows.map((r) => within(r).getAllByRole("cell").map((c) => c.textContent));
    expect(cells).toEqual([
      ["2", "8", "5", "3", "2023-11-14 22:11:20 UTC", "2.1 min"],
      ["0", "7", "2", "4", "2023-11-14 22:13:20 UTC", "1.5 s"],
      ["2", "9", "0", "1,234", "—", "—"],
    ]);
  });

  it("says so when none is open", () => {
    render(<OpenTransactions partitions={[partition(0, []), partition(1, [])]} />);
    expect(screen.getByTestId("no-open-transactions").textContent).toBe("No transaction is open on this topic.");
  });
});
