import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { ConfigDefinition } from "../api/hooks/topicConfigs";
import type { TopicDetail } from "../api/hooks/topics";
import { ConfigEditor } from "./ConfigEditor";
import { TopicConfigs } from "./TopicConfigs";

const def = (d: Partial<ConfigDefinition> & Pick<ConfigDefinition, "name" | "kind">): ConfigDefinition => ({
  unit: null, description: `what ${d.name} does`, default: "", choices: [], special: {}, minimum: null, maximum: null, ...d,
});

const DEFS: ConfigDefinition[] = [
  def({ name: "cleanup.policy", kind: "enum", default: "delete", choices: ["delete", "compact", "compact,delete"] }),
  def({ name: "retention.ms", kind: "duration", unit: "ms", default: "604800000", special: { "-1": "no limit" } }),
  def({ name: "segment.bytes", kind: "size", unit: "bytes", default: "1073741824" }),
  def({ name: "unclean.leader.election.enable", kind: "boolean", default: "false" }),
  def({ name: "min.insync.replicas", kind: "count", unit: "replicas", default: "1" }),
];

function setup(role: string, configs: Record<string, string>) {
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["me"], { kind: "user", username: "u", role, memberships: [], organisation: { id: "o", slug: "o", name: "O", created_at: "" } });
  qc.setQueryData(["topic-config-definitions"], { partitions: { default: 1, maximum: 100 }, replication_factor: { default: 1, maximum: 1 }, configs: DEFS });
  const effective = Object.fromEntries(DEFS.map((d) => [d.name, configs[d.name] ?? d.default]));
  const topic = { name: "t", configs, effective_configs: effective } as unknown as TopicDetail;
  render(<QueryClientProvider client={qc}><TopicConfigs topic={topic} /></QueryClientProvider>);
}

describe("ConfigEditor", () => {
  it("edits a duration in human units and offers its special values by name", async () => {
    const onChange = vi.fn();
    render(<ConfigEditor def={DEFS[1]} value="604800000" id="r" onChange={onChange} />);
    const amount = screen.getByRole("textbox") as HTMLInputElement;
    const unit = screen.getByLabelText("retention.ms unit") as HTMLSelectElement;
    expect([amount.value, unit.value]).toEqual(["7", "days"]);
    await userEvent.selectOptions(unit, "hours");
    expect(onChange).toHaveBeenLastCalledWith("25200000");
    await userEvent.selectOptions(unit, "no limit");
    expect(onChange).toHaveBeenLastCalledWith("-1");
    expect(amount.disabled).toBe(true);
    await userEvent.selectOptions(unit, "minutes");
    await userEvent.clear(amount);
    await userEvent.type(amount, "abc");
    expect(onChange).toHaveBeenLastCalledWith(null);
  });

  it("uses a choice list for enums, a switch for booleans and units for sizes", async () => {
    const onChange = vi.fn();
    const { unmount } = render(<ConfigEditor def={DEFS[0]} value="delete" id="c" onChange={onChange} />);
    await userEvent.selectOptions(screen.getByRole("combobox"), "compact");
    expect(onChange).toHaveBeenLastCalledWith("compact");
    unmount();
    const r2 = render(<ConfigEditor def={DEFS[3]} value="false" id="u" onChange={onChange} />);
    await userEvent.click(screen.getByRole("switch"));
    expect(onChange).toHaveBeenLastCalledWith("true");
    r2.unmount();
    render(<ConfigEditor def={DEFS[2]} value="1073741824" id="s" onChange={onChange} />);
    expect((screen.getByLabelText("segment.bytes unit") as HTMLSelectElement).value).toBe("GiB");
    await userEvent.selectOptions(screen.getByLabelText("segment.bytes unit"), "MiB");
    expect(onChange).toHaveBeenLastCalledWith("1048576");
  });
});

describe("TopicConfigs", () => {
  it("shows each config's description, default and source, and filters to overrides", async () => {
    setup("member", { "retention.ms": "3600000" });
    const table = screen.getByRole("table");
    const row = within(table).getByText("retention.ms").closest("tr")!;
    expect(within(row).getByText("what retention.ms does")).toBeTruthy();
    expect(within(row).getByText("7 days")).toBeTruthy(); // the default, in human units
    expect(within(row).getByText("override")).toBeTruthy();
    expect(within(row).getByRole("button", { name: "Reset retention.ms to default" })).toBeTruthy();
    expect(within(table).getAllByRole("row")).toHaveLength(DEFS.length + 1);
    await userEvent.click(screen.getByLabelText(/Overridden only \(1\)/));
    expect(within(screen.getByRole("table")).getAllByRole("row")).toHaveLength(2);
  });

  it("counts changes and refuses to save an invalid value", async () => {
    setup("member", {});
    expect(screen.getByRole("button", { name: "No changes" })).toHaveProperty("disabled", true);
    await userEvent.click(screen.getByRole("switch"));
    expect(screen.getByRole("switch")).toHaveProperty("checked", true);
    await userEvent.selectOptions(screen.getByLabelText("cleanup.policy"), "compact");
    expect((screen.getByLabelText("cleanup.policy") as HTMLSelectElement).value).toBe("compact");
    expect(screen.getByRole("button", { name: "Save 2 changes" })).toHaveProperty("disabled", false);
    const mir = screen.getByLabelText("min.insync.replicas");
    await userEvent.clear(mir);
    await userEvent.type(mir, "x");
    expect(screen.getByText("Not a valid value.")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Save 3 changes" })).toHaveProperty("disabled", true);
    await userEvent.click(screen.getByRole("button", { name: "Discard" }));
    expect(screen.getByRole("button", { name: "No changes" })).toBeTruthy();
  });

  it("shows values read-only to readers, in human units", () => {
    setup("read-only", { "segment.bytes": "536870912" });
    expect(screen.queryByRole("switch")).toBeNull();
    expect(screen.getByText("512 MiB")).toBeTruthy();
    expect(screen.queryByRole("button", { name: /Reset/ })).toBeNull();
  });
});
