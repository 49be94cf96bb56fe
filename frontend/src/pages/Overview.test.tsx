import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";
import { describe, expect, it } from "vitest";
import { Overview } from "./Overview";

function renderOverview(seed: (qc: QueryClient) => void) {
  // seeded answers never refetch; anything not seeded is asked of a control plane that is not
  // there (no server in a component test), so it loads and then fails as it would offline
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["brokers"], []);
  seed(qc);
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter>
        <Overview />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("Overview states", () => {
  it("says it is loading topics, then that they failed, never 'No topics yet' meanwhile", async () => {
    renderOverview(() => {});
    expect(screen.getByText("Loading topics…")).toBeTruthy();
    expect(screen.queryByText(/No topics yet/)).toBeNull();
    await screen.findByText("Topics could not be loaded (see above).");
    expect(screen.getByText("Could not load partition state.")).toBeTruthy();
    expect(screen.queryByText(/No topics yet/)).toBeNull();
  });

  it("says no topics yet once the cluster answered none, and names unread brokers for people", () => {
    renderOverview((qc) => {
      qc.setQueryData(["partitions", "*"], { ts: new Date().toISOString(), errors: [], topics: [] });
      qc.setQueryData(["traffic"], {
        ts: new Date().toISOString(), brokers: [1], counters: [], errors: ["broker 2: no answer within 2 s"],
      });
    });
    expect(screen.getByText(/No topics yet/)).toBeTruthy();
    expect(
      screen.getByText("Live bytes leave out the brokers that could not be read just now: broker 2: no answer within 2 s."),
    ).toBeTruthy();
  });
});
