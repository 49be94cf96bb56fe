import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/client";
import { TopicCreateForm, validateTopic } from "./TopicCreateForm";

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
