import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render as rtlRender, screen } from "@testing-library/react";
import type { ReactElement } from "react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/client";
import { TopicCreateForm, validateTopic } from "./TopicCreateForm";

/** Renders with the control plane's create defaults in the cache (replication factor 2 of 3). */
function render(ui: ReactElement) {
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity, retry: false } } });
  qc.setQueryData(["topic-config-definitions"], {
    partitions: { default: 1, maximum: 1000 },
    replication_factor: { default: 2, maximum: 3 },
    configs: [],
  });
  return rtlRender(<QueryClientProvider client={qc}>{ui}</QueryClientProvider>);
}

describe("TopicCreateForm", () => {
  it("refuses names Kafka would refuse, and says why, without submitting", async () => {
    const onSubmit = vi.fn();
    render(<TopicCreateForm onSubmit={onSubmit} />);
    await userEvent.type(screen.getByLabelText("Name"), "bad name!");
    await userEvent.click(screen.getByRole("button", { name: "Create topic" }));
    expect(onSubmit).not.toHaveBeenCalled();
    expect(screen.getByLabelText("Name")).toHaveAttribute("aria-invalid", "true");
    expect(screen.getByText("Use only letters, digits, '.', '_' and '-'.")).toBeTruthy();
  });

  it("submits the preset's partitions and configs, from the keyboard", async () => {
    const onSubmit = vi.fn();
    render(<TopicCreateForm onSubmit={onSubmit} />);
    await userEvent.click(screen.getByLabelText("Compacted (latest value per key)"));
    await userEvent.type(screen.getByLabelText("Name"), "orders.v1{Enter}");
    expect(onSubmit).toHaveBeenCalledWith({
      name: "orders.v1",
      partitions: 3,
      configs: { "cleanup.policy": "compact" },
      validate_only: false,
    });
  });

  it("shows the control plane's default replication factor and sends none unless changed", async () => {
    const onSubmit = vi.fn();
    render(<TopicCreateForm onSubmit={onSubmit} />);
    const rf = screen.getByLabelText("Replication factor");
    expect((rf as HTMLInputElement).value).toBe("2");
    expect(screen.getByText(/Default 2 .*at most 3/)).toBeTruthy();
    await userEvent.type(screen.getByLabelText("Name"), "plain{Enter}");
    expect(onSubmit).toHaveBeenLastCalledWith({ name: "plain", partitions: 3, configs: {}, validate_only: false });
    await userEvent.clear(rf);
    await userEvent.type(rf, "4");
    await userEvent.click(screen.getByRole("button", { name: "Create topic" }));
    expect(screen.getByText("At most 3: one replica per live broker.")).toBeTruthy();
    expect(onSubmit).toHaveBeenCalledTimes(1);
    await userEvent.clear(rf);
    await userEvent.type(rf, "3");
    await userEvent.click(screen.getByRole("button", { name: "Create topic" }));
    expect(onSubmit).toHaveBeenLastCalledWith({ name: "plain", partitions: 3, replication_factor: 3, configs: {}, validate_only: false });
  });

  it("shows the server's field errors next to the field", () => {
    const error = new ApiError(409, "TOPIC_ALREADY_EXISTS", "a topic with this name exists", {
      name: ["already exists"],
    });
    render(<TopicCreateForm onSubmit={() => {}} error={error} />);
    expect(screen.getByText("already exists")).toBeTruthy();
    expect(screen.getByLabelText("Name")).toHaveAttribute("aria-invalid", "true");
  });

  it("validates partitions and reserved names", () => {
    expect(validateTopic("__consumer_offsets", "1").name).toMatch(/reserved/);
    expect(validateTopic("ok", "0").partitions).toMatch(/1 or more/);
    expect(validateTopic("x".repeat(250), "1").name).toMatch(/249/);
    expect(validateTopic("fine-name_1.2", "12")).toEqual({});
  });
});
