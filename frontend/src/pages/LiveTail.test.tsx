import { act, render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { TopicDetail } from "../api/hooks/topics";
import { LiveTail } from "./LiveTail";

// A stand-in for the browser's WebSocket: records the URL the page opens and lets the test
// play the server's messages (the real socket runs in tests/e2e/console.e2e.mjs).
class Socket {
  static opened: Socket[] = [];
  onmessage: ((ev: { data: string }) => void) | null = null;
  onclose: ((ev: { code: number }) => void) | null = null;
  sent: string[] = [];
  constructor(public url: string) {
    Socket.opened.push(this);
  }
  send(data: string) {
    this.sent.push(data);
  }
  close() {}
  serve(doc: unknown) {
    act(() => this.onmessage?.({ data: JSON.stringify(doc) }));
  }
}

const rec = (partition: number, offset: number, value: string) => ({
  partition, offset, timestamp: 1_700_000_000_000 + offset, key: `k${offset}`, key_format: "text", value, value_format: "text", headers: [],
});

beforeEach(() => {
  Socket.opened = [];
  vi.stubGlobal("WebSocket", Socket);
});
afterEach(() => vi.unstubAllGlobals());

function rows(): string[][] {
  const table = screen.getByRole("table", { name: "Live records" });
  return within(table).getAllByRole("row").slice(1).map((r) => within(r).getAllByRole("cell").map((c) => c.textContent ?? ""));
}

describe("LiveTail", () => {
  it("follows every partition by default, newest on top, with each record's partition", () => {
    render(<LiveTail topic={{ name: "orders", partitions: 3 } as TopicDetail} />);
    const sock = Socket.opened[0];
    expect(new URL(sock.url).searchParams.get("partition")).toBe("all");
    sock.serve({ type: "open", partitions: [0, 1, 2], partition: null });
    sock.serve({ type: "records", partition: 2, records: [rec(2, 7, "from two")] });
    sock.serve({ type: "records", partition: 0, records: [rec(0, 3, "from zero")] });
    expect(rows().map((r) => [r[0], r[1], r[4]])).toEqual([["0", "3", "from zero"], ["2", "7", "from two"]]);
    expect(screen.getByTestId("tail-status").textContent).toBe("live");
  });

  it("tails one partition when chosen, and opens a long value whole", async () => {
    render(<LiveTail topic={{ name: "orders", partitions: 3 } as TopicDetail} />);
    await userEvent.selectOptions(screen.getByLabelText("Partition"), "1");
    const sock = Socket.opened[Socket.opened.length - 1];
    expect(new URL(sock.url).searchParams.get("partition")).toBe("1");
    const long = "y".repeat(1000);
    sock.serve({ type: "records", partition: 1, records: [rec(1, 0, long)] });
    expect(rows()[0][4]).toContain("(1000 characters: open the row)");
    await userEvent.click(within(screen.getByRole("table", { name: "Live records" })).getAllByRole("row")[1]);
    expect(screen.getByTestId("message-value").textContent).toBe(long);
  });

  it("offers one partition at a time on a topic with more than the tail follows", () => {
    render(<LiveTail topic={{ name: "big", partitions: 100 } as TopicDetail} />);
    expect(new URL(Socket.opened[0].url).searchParams.get("partition")).toBe("0");
    const all = screen.getByRole("option", { name: /All partitions/ }) as HTMLOptionElement;
    expect(all.disabled).toBe(true);
  });
});
