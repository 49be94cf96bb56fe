// The console at phone width (390 x 844) in headless Chromium: the navigation is collapsed
// behind a Menu button on every page, opens and closes by mouse and keyboard, and no page is
// wider than the viewport (wide tables scroll inside their own box). A screenshot per page.
// Driven by tests/e2e/test_console_narrow.py, which passes (besides the harness's variables)
// NARROW_TOPIC (a topic with a record whose value is long) and NARROW_GROUP (a group with
// committed offsets on it).
import { expectVisible, openConsole } from "./harness.mjs";

const WIDTH = 390;
const TOPIC = process.env.NARROW_TOPIC;
const GROUP = process.env.NARROW_GROUP;
const DESKTOP = { width: 1366, height: 800 };
const PAGES = [
  ["Overview", "Overview", "overview"], ["Topics", "Topics", "topics"], ["Consumer groups", "Consumer groups", "groups"],
  ["Brokers", "Brokers", "brokers"], ["Reports", "Reports", "reports"], ["Service accounts", "Service accounts", "service-accounts"],
  ["API keys", "API keys", "api-keys"], ["ACLs", "ACLs", "acls"], ["Quotas", "Quotas", "quotas"], ["Audit log", "Audit log", "audit"],
];
const TOPIC_TABS = (p) => [
  ["Configs", () => p.getByText("retention.ms").first()],
  ["Messages", () => p.getByRole("form", { name: "Find messages" })],
  ["Live tail", () => p.getByTestId("tail-status")],
  ["Produce", () => p.getByRole("button", { name: "Produce" })],
  ["Consumers", () => p.getByRole("table", { name: "Consuming groups" }).getByText(GROUP)],
  ["Throughput", () => p.getByRole("heading", { name: "Live messages/s" })],
];
const { page, newPage, shot, step, signIn, finish } = await openConsole({ viewport: { width: WIDTH, height: 844 }, prefix: "narrow-" });

const menu = () => page.getByRole("button", { name: "Menu" });
const nav = () => page.getByRole("navigation", { name: "Main" });

/** The navigation is collapsed: the button says so and the links are not shown. */
async function collapsed() {
  await nav().waitFor({ state: "hidden" });
  const expanded = await menu().getAttribute("aria-expanded");
  if (expanded !== "false") throw new Error(`menu aria-expanded=${expanded} with the nav hidden`);
}

/**
 * Neither the document nor the content area scrolls sideways; on failure, name the elements
 * that stick out past the viewport (outside a table, which may scroll on its own, or placed
 * absolutely, which a table does not clip unless it is their containing block).
 */
async function fits(what, p = page, width = WIDTH) {
  const m = await p.evaluate((width) => {
    const doc = document.documentElement;
    const main = document.querySelector("main.content");
    // placed absolutely against something outside the table: the table's scrolling does not clip it
    const placed = (el) => ["absolute", "fixed"].includes(getComputedStyle(el).position) && !el.offsetParent?.closest("table");
    const wide = [...document.body.querySelectorAll("*")]
      .filter((el) => el.getBoundingClientRect().right > width + 0.5 && (!el.closest("table") || placed(el)))
      .slice(0, 5)
      .map((el) => `${el.tagName.toLowerCase()}.${el.className} (right ${Math.round(el.getBoundingClientRect().right)})`);
    return { doc: doc.scrollWidth, main: main ? main.scrollWidth - main.clientWidth : 0, wide };
  }, width);
  if (m.doc > width || m.main > 0 || m.wide.length) {
    throw new Error(`${what}: document ${m.doc} px wide, content overflows by ${m.main} px; sticking out: ${m.wide.join(", ")}`);
  }
}

/** Open the menu, choose a page, and check the menu closed itself and the page fits. */
async function visit(link, heading, name) {
  await menu().click();
  await expectVisible(nav());
  if ((await menu().getAttribute("aria-expanded")) !== "true") throw new Error("menu open but aria-expanded is not true");
  await nav().getByRole("link", { name: link, exact: true }).click();
  await expectVisible(page.getByRole("heading", { level: 1, name: heading, exact: true }));
  await collapsed();
  await page.waitForTimeout(600); // let the page's data arrive before measuring
  await fits(name);
  await shot(name);
}

await step("sign in at 390 px: the navigation starts collapsed", async () => {
  await signIn();
  await expectVisible(page.getByRole("heading", { level: 1, name: "Overview" }));
  await collapsed();
  await page.getByTestId("brokers-up").filter({ hasText: "3 / 3" }).waitFor();
  await fits("overview");
  await shot("overview");
});

await step("the menu opens over the page and lists every page", async () => {
  await menu().click();
  await expectVisible(nav());
  const links = await nav().getByRole("link").allTextContents();
  for (const l of ["Overview", "Topics", "Consumer groups", "Brokers", "Reports", "Service accounts", "API keys", "ACLs", "Quotas", "Audit log"]) {
    if (!links.includes(l)) throw new Error(`menu lacks ${l}: ${links}`);
  }
  await fits("open menu");
  await shot("menu-open");
});

await step("Escape closes the menu and gives focus back to the button; Enter opens it", async () => {
  await page.keyboard.press("Escape");
  await collapsed();
  if (!(await menu().evaluate((b) => b === document.activeElement))) throw new Error("focus is not on the Menu button");
  await page.keyboard.press("Enter");
  await expectVisible(nav());
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => document.activeElement?.textContent);
  if (focused !== "Overview") throw new Error(`Tab after the button went to ${focused}, not the first link`);
  await page.keyboard.press("Escape");
  await collapsed();
});

await step("topics", () => visit("Topics", "Topics", "topics"));

await step("a topic's tabs all fit", async () => {
  await page.getByRole("link", { name: TOPIC, exact: true }).click();
  await expectVisible(page.getByRole("heading", { level: 1, name: TOPIC }));
  await page.getByRole("table", { name: "Partitions" }).waitFor();
  await collapsed();
  await fits("topic partitions");
  await shot("topic-partitions");
  const tabs = page.getByRole("navigation", { name: "Topic" });
  for (const [tab, ready] of TOPIC_TABS(page)) {
    await tabs.getByRole("link", { name: tab, exact: true }).click();
    await expectVisible(ready());
    await page.waitForTimeout(tab === "Throughput" ? 3500 : 600);
    await fits(`topic ${tab}`);
    await shot(`topic-${tab.toLowerCase().replace(/\W+/g, "-")}`);
  }
});

await step("messages: a long record's table scrolls inside its box, the page does not", async () => {
  await page.getByRole("navigation", { name: "Topic" }).getByRole("link", { name: "Messages", exact: true }).click();
  const form = page.getByRole("form", { name: "Find messages" });
  const from = form.getByLabel("From");
  if (await from.count()) await from.selectOption("earliest").catch(() => {});
  await form.getByRole("button", { name: "Search" }).click();
  const table = page.getByRole("table", { name: "Messages" });
  await table.getByText("narrow-key").first().waitFor();
  await fits("messages with a long record");
  await shot("messages");
});

await step("consumer groups and a group's page", async () => {
  await visit("Consumer groups", "Consumer groups", "groups");
  await page.getByRole("table", { name: "Consumer groups" }).getByRole("link", { name: GROUP }).click();
  await expectVisible(page.getByRole("heading", { level: 1, name: GROUP }));
  await page.getByRole("table", { name: "Lag per partition" }).waitFor();
  await fits("group detail");
  await shot("group-detail");
});

await step("brokers: the wide table scrolls sideways on its own", async () => {
  await visit("Brokers", "Brokers", "brokers");
  const table = page.getByRole("table", { name: "Brokers" });
  await table.getByText("up", { exact: true }).first().waitFor();
  const box = await table.evaluate((t) => ({ scroll: t.scrollWidth, client: t.clientWidth, overflow: getComputedStyle(t).overflowX }));
  if (!(box.scroll > box.client) || box.overflow !== "auto") throw new Error(`brokers table does not scroll: ${JSON.stringify(box)}`);
  await table.evaluate((t) => t.scrollTo({ left: t.scrollWidth }));
  await fits("brokers scrolled");
  await shot("brokers-scrolled");
});

for (const [link, heading, name] of PAGES.slice(4)) await step(link.toLowerCase(), () => visit(link, heading, name));
await step("back to the overview from the menu", () => visit("Overview", "Overview", "overview-again"));

// The same pages on a laptop screen: the sidebar shows, no Menu button, nothing overflows.
const desk = await newPage(DESKTOP);

await step("at 1366 px the sidebar shows and every page fits beside it", async () => {
  await signIn(desk);
  await expectVisible(desk.getByRole("navigation", { name: "Main" }));
  if (await desk.getByRole("button", { name: "Menu" }).isVisible()) throw new Error("Menu button shown at 1366 px");
  for (const [link, heading, name] of PAGES) {
    await desk.getByRole("navigation", { name: "Main" }).getByRole("link", { name: link, exact: true }).click();
    await expectVisible(desk.getByRole("heading", { level: 1, name: heading, exact: true }));
    await desk.waitForTimeout(600);
    await fits(`${name} at 1366 px`, desk, DESKTOP.width);
    await shot(`wide-${name}`, desk);
  }
  await desk.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Topics", exact: true }).click();
  await desk.getByRole("link", { name: TOPIC, exact: true }).click();
  for (const [tab, ready] of TOPIC_TABS(desk)) {
    await desk.getByRole("navigation", { name: "Topic" }).getByRole("link", { name: tab, exact: true }).click();
    await expectVisible(ready());
    await desk.waitForTimeout(600);
    await fits(`topic ${tab} at 1366 px`, desk, DESKTOP.width);
  }
});

// headers may take two lines; a broker's row may not (the Disk column used to wrap)
await step("at 1366 px no data cell of the Brokers table wraps", async () => {
  await desk.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Brokers", exact: true }).click();
  const table = desk.getByRole("table", { name: "Brokers" });
  await table.getByText("up", { exact: true }).first().waitFor();
  // a cell wraps when its text is taller than the same text kept on one line
  const wrapped = await table.evaluate((t) => [...t.querySelectorAll("td")].filter((cell) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const before = range.getBoundingClientRect().height;
    const saved = cell.style.whiteSpace;
    cell.style.whiteSpace = "nowrap";
    const after = range.getBoundingClientRect().height;
    cell.style.whiteSpace = saved;
    return before > after + 2;
  }).map((cell) => `"${cell.textContent}"`));
  const box = await table.evaluate((t) => ({ table: t.getBoundingClientRect().right, main: document.querySelector("main.content").getBoundingClientRect().right }));
  if (box.table > box.main) throw new Error(`Brokers table ends at ${box.table} px, past the content (${box.main} px)`);
  if (wrapped.length) throw new Error(`wrapped at 1366 px: ${wrapped.join("; ")}`);
  await shot("wide-brokers-table", desk);
});

await finish();
