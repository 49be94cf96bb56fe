// Charts that have history when they open and tell the truth (issue 24, items 2 and 3), in
// headless Chromium against the real service. tests/e2e/test_console_charts.py seeds three
// hours of live-series history (tests/e2e/seed_history.py) for CHARTS_TOPIC and
// CHARTS_GROUP, then runs this script: the overview's byte and message charts, the topic's
// throughput tab and the group's lag chart draw those hours on first load (no waiting for
// live readings), on a time axis whose ticks fall on round real times; sizes never read 0 B
// before they are measured. A screenshot per page.
import { expectVisible, openConsole } from "./harness.mjs";

const URL = process.env.SLUICE_URL;
const TOPIC = process.env.CHARTS_TOPIC;
const GROUP = process.env.CHARTS_GROUP;
const MINUTES = Number(process.env.CHARTS_MINUTES);
const { page, shot, step, signIn, finish } = await openConsole({ prefix: "charts-" });

/** The figure's measured point count once drawn (its SVG line paths present). */
async function drawn(name, atLeast) {
  const fig = page.getByRole("figure", { name });
  await fig.locator("path.recharts-line-curve").first().waitFor();
  const points = Number(await fig.getAttribute("data-points"));
  if (!(points >= atLeast)) throw new Error(`${name}: ${points} points drawn, expected at least ${atLeast}`);
  return fig;
}

/** Tick labels of a figure's time axis: local times on round half hours (a real time
 * axis over three hours), not evenly spaced sample times. */
async function roundTicks(fig) {
  const tick = fig.locator(".recharts-xAxis-tick-labels .recharts-cartesian-axis-tick-value");
  await tick.first().waitFor().catch(async () => {
    throw new Error(`no x-axis tick label drawn: ${(await fig.innerHTML()).slice(0, 1500)}`);
  });
  const ticks = await tick.allTextContents();
  if (ticks.length < 3) throw new Error(`only ${ticks.length} ticks: ${ticks.join(", ")}`);
  const odd = ticks.filter((t) => !/^\d{1,2}:(00|30)(\s?[AP]M)?$/.test(t)); // 24 h or 12 h clocks
  if (odd.length) throw new Error(`ticks not on round times: ${ticks.join(", ")}`);
  return ticks;
}

await step("sign in", async () => {
  await signIn();
});

await step("the overview draws the last hours on first load", async () => {
  const t0 = Date.now();
  await page.goto(URL + "/");
  // the history alone: MINUTES points per series, before two live readings could exist
  const bytes = await drawn("Bytes in and out per second", 2 * (MINUTES - 5));
  await drawn("Messages in per second", MINUTES - 5);
  const took = Date.now() - t0;
  const ticks = await roundTicks(bytes);
  await expectVisible(page.getByTestId("history-as-of").getByText("Per minute from", { exact: false }));
  const sizes = await page.getByTestId("sizes-as-of").textContent();
  if (!/^Sizes (as of|are not measured yet)/.test(sizes)) throw new Error(`sizes label: ${sizes}`);
  console.log(`     drawn ${took} ms after opening; ticks ${ticks.join(" ")}; ${sizes}`);
  await shot("overview-history");
});

await step("a topic's throughput tab draws its history on first load", async () => {
  await page.goto(`${URL}/topics/${encodeURIComponent(TOPIC)}/throughput`);
  const records = await drawn("Records per second", 2 * (MINUTES - 5));
  await drawn("Bytes per second", 2 * (MINUTES - 5));
  await roundTicks(records);
  await expectVisible(page.getByTestId("throughput-as-of").getByText("as of", { exact: false }));
  await expectVisible(page.getByRole("heading", { name: "Live messages/s" }));
  await shot("topic-throughput-history");
});

await step("a topic's partition sizes say not measured yet, never 0 B", async () => {
  await page.goto(`${URL}/topics/${encodeURIComponent(TOPIC)}`);
  const table = page.getByRole("table", { name: "Partitions" });
  await expectVisible(table.getByText("not measured yet"));
  const label = await page.getByTestId("sizes-as-of").textContent();
  if (!/not measured yet/.test(label)) throw new Error(`sizes label: ${label}`);
  await shot("topic-sizes");
});

await step("a group's page draws its lag over time on first load", async () => {
  await page.goto(`${URL}/groups/${encodeURIComponent(GROUP)}`);
  // every third minute was not sampled: carried forward, so the total still has a point at
  // each sample and the step line never falls to 0 between them
  const fig = await drawn("Lag over time", Math.floor((MINUTES * 2) / 3) - 5);
  await roundTicks(fig);
  const yTicks = await fig.locator(".recharts-yAxis-tick-labels .recharts-cartesian-axis-tick-value").allTextContents();
  await expectVisible(page.getByTestId("lag-as-of").getByText("as of", { exact: false }));
  console.log(`     lag axis ${yTicks.join(" ")}`);
  await shot("group-lag-history");
});

await finish();
