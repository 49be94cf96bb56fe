import { fireEvent, render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router-dom";
import { describe, expect, it } from "vitest";
import { MAIN_NAV_ID, MainNav, MenuButton, useCollapsibleNav } from "./Navigation";

// the same composition as App.tsx's Shell: the button in the topbar, the nav beside the routes
function Shell({ admin = true }: { admin?: boolean }) {
  const nav = useCollapsibleNav();
  return (
    <>
      <header><MenuButton nav={nav} /></header>
      <MainNav nav={nav} admin={admin} />
      <main>
        <Routes>
          <Route path="/" element={<h1>Overview</h1>} />
          <Route path="/topics" element={<h1>Topics</h1>} />
          <Route path="/brokers" element={<h1>Brokers</h1>} />
        </Routes>
      </main>
    </>
  );
}

function setup(admin = true) {
  render(<MemoryRouter initialEntries={["/"]}><Shell admin={admin} /></MemoryRouter>);
  const button = screen.getByRole("button", { name: "Menu" });
  const nav = screen.getByRole("navigation", { name: "Main" });
  return { button, nav, user: userEvent.setup() };
}

describe("collapsible navigation", () => {
  it("is a disclosure: the menu button controls the nav and says whether it is open", async () => {
    const { button, nav, user } = setup();
    expect(nav.id).toBe(MAIN_NAV_ID);
    expect(button).toHaveAttribute("aria-controls", MAIN_NAV_ID);
    expect(button).toHaveAttribute("aria-expanded", "false");
    expect(nav).toHaveAttribute("data-open", "false");
    await user.click(button);
    expect(button).toHaveAttribute("aria-expanded", "true");
    expect(nav).toHaveAttribute("data-open", "true");
    await user.click(button);
    expect(button).toHaveAttribute("aria-expanded", "false");
  });

  it("opens from the keyboard and closes on Escape, focus back on the button", async () => {
    const { button, nav, user } = setup();
    button.focus();
    await user.keyboard("{Enter}");
    expect(nav).toHaveAttribute("data-open", "true");
    await user.tab();
    expect(document.activeElement?.textContent).toBe("Overview");
    await user.keyboard("{Escape}");
    expect(nav).toHaveAttribute("data-open", "false");
    expect(button).toHaveAttribute("aria-expanded", "false");
    expect(document.activeElement).toBe(button);
    await user.keyboard(" ");
    expect(nav).toHaveAttribute("data-open", "true");
  });

  it("closes when a link navigates, and when the current page's link is chosen again", async () => {
    const { button, nav, user } = setup();
    await user.click(button);
    await user.click(screen.getByRole("link", { name: "Topics" }));
    expect(screen.getByRole("heading", { name: "Topics" })).toBeTruthy();
    expect(nav).toHaveAttribute("data-open", "false");
    expect(button).toHaveAttribute("aria-expanded", "false");
    await user.click(button);
    await user.click(screen.getByRole("link", { name: "Topics" }));
    expect(nav).toHaveAttribute("data-open", "false");
  });

  it("ignores Escape while closed and clicks on the nav that are not links", async () => {
    const { button, nav, user } = setup();
    fireEvent.keyDown(document, { key: "Escape" });
    expect(nav).toHaveAttribute("data-open", "false");
    await user.click(button);
    await user.click(screen.getByText("Access"));
    expect(nav).toHaveAttribute("data-open", "true");
  });

  it("shows the access pages to admins only", () => {
    setup(false);
    expect(screen.queryByRole("link", { name: "API keys" })).toBeNull();
    expect(screen.getAllByRole("link").map((a) => a.textContent)).toEqual(["Overview", "Topics", "Consumer groups", "Brokers", "Reports"]);
  });
});
