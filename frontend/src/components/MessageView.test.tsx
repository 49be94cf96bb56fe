import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { MessageView, valueFile, type ViewRecord } from "./MessageView";

const hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';

function record(over: Partial<ViewRecord> = {}): ViewRecord {
  return {
    partition: 1, offset: 42, timestamp: 1_700_000_000_000,
    key: "k<b>1</b>", key_format: "text", value: hostile, value_format: "text",
    headers: [{ name: "trace", value: btoa("<i>x</i>") }],
    ...over,
  };
}

// jsdom's Blob has no arrayBuffer(): read it as a browser of any age would
function read(blob: Blob): Promise<ArrayBuffer> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result as ArrayBuffer);
    r.onerror = () => reject(r.error);
    r.readAsArrayBuffer(blob);
  });
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

  it("shows a long value whole with its size, and copies it", async () => {
    const user = userEvent.setup(); // a clipboard the test can read
    const long = "x".repeat(300_000);
    render(<MessageView record={record({ value: long })} initialMode="text" />);
    expect(screen.getByTestId("message-value").textContent).toBe(long);
    expect(screen.getByTestId("message-value-size").textContent).toBe("(293.0 KiB)");
    await user.click(screen.getByRole("button", { name: "Copy value" }));
    expect(await navigator.clipboard.readText()).toBe(long);
    expect(screen.getByText("Copied.")).toBeTruthy();
  });

  it("downloads the value as the broker gave it: bytes for binary, compact JSON for JSON", async () => {
    const bin = valueFile(record({ value: btoa("\u0000\u0001\u00ff"), value_format: "base64" }));
    expect(bin.name).toBe("partition-1-offset-42.bin");
    expect(Array.from(new Uint8Array(await read(bin.blob)))).toEqual([0, 1, 255]);
    const json = valueFile(record({ value: { a: [1, 2] }, value_format: "json" }));
    expect(json.name).toBe("partition-1-offset-42.json");
    expect(new TextDecoder().decode(await read(json.blob))).toBe('{"a":[1,2]}');
  });
});
