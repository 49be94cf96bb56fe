import { render, screen, within } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";
import { describe, expect, it } from "vitest";
import { LagTable } from "./LagTable";

describe("LagTable", () => {
  it("lists partitions worst lag first, with time lag and the total", () => {
    render(
      <MemoryRouter>
        <LagTable
          offsets={[
            { topic: "orders", partition: 0, committed_offset: 90, log_end_offset: 100, lag: 10, time_lag_ms: 1500 },
            { topic: "orders", partition: 1, committed_offset: null, log_end_offset: 7, lag: 7, time_lag_ms: null },
            { topic: "orders", partition: 2, committed_offset: 5000, log_end_offset: 6234, lag: 1234, time_lag_ms: 125_000 },
          ]}
        />
      </MemoryRouter>,
    );
    const rows = within(screen.getByRole("table")).getAllByRole("row").slice(1, 4);
    expect(rows.map((r) => within(r).getAllByRole("cell")[1].textContent)).toEqual(["2", "0", "1"]);
    expect(within(rows[0]).getAllByRole("cell")[4].textContent).toBe("1,234");
    expect(within(rows[0]).getAllByRole("cell")[5].textContent).toBe("2.1 min");
    expect(within(rows[1]).getAllByRole("cell")[5].textContent).toBe("1.5 s");
    expect(within(rows[0]).getByRole("link", { name: "orders" }).getAttribute("href")).toBe("/topics/orders");
    expect(within(rows[2]).getAllByRole("cell")[2].textContent).toBe("none");
    expect(screen.getByTestId("total-lag").textContent).toBe("1,251");
  });

  it("says so when nothing is committed", () => {
    render(<LagTable offsets={[]} />);
    expect(screen.getByText("This group has committed no offsets yet.")).toBeTruthy();
  });
});
