// A topic's transactions in the console: the partitions table shows each partition's last
// stable offset beside its high watermark, and the open transactions table names the one
// transaction left open (producer id, epoch, first offset, how long open); once it is
// aborted, the LSO catches up and the table says none is open. Driven by
// tests/e2e/test_console_transactions.py, which passes TXN_TOPIC (partition 0: a transaction
// of three records left open; partition 1: one of two records committed), TXN_EXPECT ("open"
// or "ended") and, when open, TXN_PRODUCER_ID.
import { URL, expectVisible, openConsole } from "./harness.mjs";

const TOPIC = process.env.TXN_TOPIC;
const EXPECT = process.env.TXN_EXPECT;
const { page, shot, step, signIn, finish } = await openConsole({ prefix: `transactions-${EXPECT}-` });

/** The text of each cell of partition `n`'s row in the partitions table. */
async function partitionRow(n) {
  const table = page.getByRole("table", { name: "Partitions" });
  const row = table.getByRole("row").filter({ has: page.getByRole("cell", { name: String(n), exact: true }).first() }).first();
  return row.getByRole("cell").allTextContents();
}

/** Poll (the page refreshes every 3 s) until `check()` stops throwing, at most `ms`. */
async function eventually(check, ms = 20_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await page.waitForTimeout(500);
    }
  }
}

await step("sign in", () => signIn());

await step("the partitions table has the last stable offset beside the high watermark", async () => {
  await page.goto(`${URL}/topics/${encodeURIComponent(TOPIC)}`);
  await expectVisible(page.getByRole("table", { name: "Partitions" }).getByRole("cell"));
  const headers = await page.getByRole("table", { name: "Partitions" }).getByRole("columnheader").allTextContents();
  const hw = headers.indexOf("High watermark");
  if (hw < 0 || headers[hw + 1] !== "Last stable") throw new Error(`columns: ${headers.join(" | ")}`);
  await eventually(async () => {
    const p0 = await partitionRow(0);
    const p1 = await partitionRow(1);
    // partition 0: three records of the open transaction; partition 1: two records + marker
    const want = EXPECT === "open" ? ["3", "0"] : ["4", "4"];
    if (p0[hw] !== want[0] || p0[hw + 1] !== want[1]) throw new Error(`partition 0 HW/LSO ${p0[hw]}/${p0[hw + 1]}, expected ${want}`);
    if (p1[hw] !== "3" || p1[hw + 1] !== "3") throw new Error(`partition 1 HW/LSO ${p1[hw]}/${p1[hw + 1]}`);
  });
});

if (EXPECT === "open") {
  await step("the open transaction is listed with its producer, epoch, first offset and age", async () => {
    const table = page.getByRole("table", { name: "Open transactions" });
    await expectVisible(table);
    const rows = table.getByRole("row");
    if ((await rows.count()) !== 2) throw new Error(`${(await rows.count()) - 1} open transactions listed`);
    const cells = await rows.nth(1).getByRole("cell").allTextContents();
    const [partition, producer, epoch, first, started, age] = cells;
    if (partition !== "0" || producer !== process.env.TXN_PRODUCER_ID || epoch !== "0" || first !== "0") {
      throw new Error(`row: ${cells.join(" | ")}`);
    }
    if (!/UTC$/.test(started) || !/^\d+(\.\d)? (ms|s|min)$/.test(age)) throw new Error(`started ${started}, open for ${age}`);
    await shot("open-transaction");
  });
} else {
  await step("no transaction is open once it is aborted", async () => {
    await expectVisible(page.getByTestId("no-open-transactions"));
    await shot("no-open-transaction");
  });
}

await finish();
