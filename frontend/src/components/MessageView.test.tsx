import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { MessageView, type ViewRecord } from "./MessageView";

const hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';

function record(over: Partial<ViewRecord> = {}): ViewRecord {
  return {
    partition: 1, offset: 42, timestamp: 1_700_000_000_000,
    key: "k<b>1</b>", key_format: "text", value: hostile, value_format: "text",
    headers: [{ name: "trace", value: btoa("<i>x</i>") }],
    ...over,
  };
}

describe("MessageView", () => {
  it("renders payloads as text, never as HTML", () => {
    const { container } = render(<MessageView record={record()} />);
    expect(container.querySelector("img")).toBeNull();
    expect(container.querySelector("script")).toBeNull();
    expect(container.querySelector("b")).toBeNull();
    expect(container.querySelector("i")).toBeNull();
    expect(screen.getByTestId("message-value").textContent).toBe(hostile);
    expect(screen.getByTestId("message-key").textContent).toBe("k<b>1</b>");
    expect(screen.getByText("<i>x</i>")).toBeTruthy();
    expect((window as unknown as { pwned?: number }).pwned).toBeUndefined();
  });

  it("pretty-prints JSON, and shows hex on request", async () => {
    render(<MessageView record={record({ value: { a: [1, "<b>"] }, value_format: "json" })} />);
    expect(screen.getByTestId("message-value").textContent).toBe('{\n  "a": [\n    1,\n    "<b>"\n  ]\n}');
    await userEvent.click(screen.getByLabelText("HEX"));
    const hex = screen.getByTestId("message-value").textContent ?? "";
    expect(hex.startsWith("00000000  7b 22 61 22 3a 5b 31 2c")).toBe(true);
  });

  it("says when a binary value has no text form", () => {
    render(<MessageView record={record({ value: btoa("\u0000\u0001\u00ff"), value_format: "base64" })} initialMode="text" />);
    expect(screen.getByTestId("message-value").textContent).toBe("(binary, 3 bytes; use the hex view)");
  });
});
