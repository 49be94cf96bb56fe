// The console in a real browser (headless Chromium via playwright-core) against a running
// stack. Driven by tests/e2e/test_console_e2e.py, which starts the stack and passes:
//   SLUICE_URL, SLUICE_USER, SLUICE_PASSWORD, ARTIFACTS (screenshots), GROUP (a consumer group
//   with lag, or empty when the groups API is not there), CHROMIUM (the executable),
//   REPORT_TOPIC and PEAK_RECORDS (report rows stored for that topic before the run),
//   READER_USER/READER_PASSWORD (a read-only member of Demo, for the group run) and TOPIC.
// Prints one line per step; exits non-zero on the first failure (with a screenshot).
import { readFile } from "node:fs/promises";
import { URL, callApi, expectVisible, none, openConsole } from "./harness.mjs";

const GROUP = process.env.GROUP || "";
const GROUP_ONLY = process.env.GROUP_ONLY === "1"; // sign in, the group steps, sign out
const { page, newPage, shot, step, finish } = await openConsole({ prefix: GROUP_ONLY ? "groups-" : "" });
const kib = (text) => /[1-9].* (KiB|MiB)\/s$/.test(text || "");
const topic = `e2e-${Date.now().toString(36)}`;
let keyPartition = 0;

// the text of one column in every body row of a table
const columnTexts = async (table, header) => {
  const headers = (await table.getByRole("columnheader").allTextContents()).map((h) => h.trim());
  const i = headers.indexOf(header);
  if (i < 0) throw new Error(`no column ${header} in ${headers.join(", ")}`);
  const rows = table.getByRole("row");
  const out = [];
  for (let r = 1; r < (await rows.count()); r++) out.push(((await rows.nth(r).getByRole("cell").nth(i).textContent()) || "").trim());
  return out;
};

await step("sign-in page loads with a strict CSP", async () => {
  const resp = await page.goto(URL + "/");
  const csp = resp.headers()["content-security-policy"] || "";
  if (!csp.includes("script-src 'self'")) throw new Error(`CSP header missing: ${csp}`);
  await expectVisible(page.getByRole("heading", { name: "Sign in to Sluice" }));
  await shot("sign-in");
});

if (!GROUP_ONLY) await step("wrong password is refused in words", async () => {
  await page.getByLabel("Username").fill(process.env.SLUICE_USER);
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expectVisible(page.getByText("wrong username or password"));
});

await step("sign in (keyboard)", async () => {
  await page.getByLabel("Username").fill(process.env.SLUICE_USER);
  await page.getByLabel("Password").fill(process.env.SLUICE_PASSWORD);
  await page.getByLabel("Password").press("Enter");
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  if (await page.getByText("Choose an organisation above", { exact: false }).count()) {
    // several memberships and none chosen yet in this session: the switcher asks
    await shot("choose-organisation");
    await page.getByLabel("Organisation").selectOption({ label: "Demo (owner)" });
  }
  await expectVisible(page.getByRole("heading", { name: "Overview" }));
  await page.getByTestId("brokers-up").filter({ hasText: "3 / 3" }).waitFor();
  await page.waitForTimeout(3500); // one more poll so the live rate has two samples
  await shot("overview");
});

if (!GROUP_ONLY) {
await step("create a topic (validation first)", async () => {
  await page.getByRole("link", { name: "Topics" }).click();
  await expectVisible(page.getByRole("heading", { name: "Topics" }));
  await shot("topics");
  await page.getByRole("button", { name: "New topic" }).click();
  await page.getByLabel("Name").fill("no spaces allowed");
  await page.getByRole("button", { name: "Create topic" }).click();
  await expectVisible(page.getByText("Use only letters, digits, '.', '_' and '-'."));
  await page.getByLabel("Name").fill(topic);
  await page.getByLabel("Partitions").fill("2");
  await shot("topic-create");
  await page.getByRole("button", { name: "Create topic" }).click();
  await expectVisible(page.getByRole("heading", { name: topic }));
  await page.getByRole("table", { name: "Partitions" }).getByText("broker", { exact: false }).first().waitFor();
  await shot("topic-detail");
});

await step("topic configs are listed", async () => {
  await page.getByRole("link", { name: "Configs" }).click();
  await expectVisible(page.getByText("retention.ms"));
  await shot("topic-configs");
});

await step("produce a test message", async () => {
  await page.getByRole("link", { name: "Produce" }).click();
  await page.getByLabel("Key").fill("e2e-key");
  await page.getByLabel("Value", { exact: true }).fill('{"hello": "<b>browser</b>", "n": 1}');
  await page.getByLabel("Value type").selectOption("JSON");
  await page.getByRole("button", { name: "Add header" }).click();
  await page.getByLabel("Header 1 name").fill("source");
  await page.getByLabel("Header 1 value").fill("e2e");
  await page.getByRole("button", { name: "Produce" }).click();
  const produced = page.getByTestId("produced");
  await produced.waitFor();
  const m = (await produced.textContent()).match(/partition (\d+) at offset (\d+)/);
  if (!m) throw new Error(await produced.textContent());
  keyPartition = Number(m[1]);
  await shot("produce");
});

await step("see it in the message browser (search by key)", async () => {
  await page.getByRole("link", { name: "Messages" }).click();
  await page.getByLabel("Key", { exact: true }).fill("e2e-key");
  await page.getByLabel("From").selectOption("earliest");
  await page.getByRole("button", { name: "Search" }).click();
  const table = page.getByRole("table", { name: "Messages" });
  await table.getByText("e2e-key").waitFor();
  await table.getByRole("row").nth(1).click();
  const value = page.getByTestId("message-value");
  await value.waitFor();
  const text = await value.textContent();
  if (!text.includes("<b>browser</b>")) throw new Error(`value shown as ${text}`);
  if ((await page.locator(".message-view b").count()) !== 0) throw new Error("payload rendered as HTML");
  await expectVisible(page.getByText("e2e", { exact: true }));
  await shot("messages");
});

await step("filter by a JSON path", async () => {
  await page.getByLabel("Key", { exact: true }).fill("");
  await page.getByLabel("Partition").selectOption("all"); // the filter runs on every partition
  await page.getByLabel("JSON path").fill("$.n");
  await page.getByLabel("equals").fill("2");
  await page.getByRole("button", { name: "Search" }).click();
  await expectVisible(page.getByText("No messages match."));
  await page.getByLabel("equals").fill("1");
  await page.getByRole("button", { name: "Search" }).click();
  await page.getByRole("table", { name: "Messages" }).getByText("e2e-key").waitFor();
  await page.getByLabel("JSON path").fill("$..evil()");
  await page.getByRole("button", { name: "Search" }).click();
  await expectVisible(page.getByText("cannot read the JSON path", { exact: false }));
});

const produce = async (body) => {
  const w = await callApi(page, "POST", `/api/v1/console/topics/${topic}/messages`, body);
  if (w.status !== 200) throw new Error(`produce answered ${w.status}: ${JSON.stringify(w.doc)}`);
  return w.doc;
};
const search = () => page.getByRole("button", { name: "Search" }).click();

await step("messages: newest first across partitions, then one partition", async () => {
  for (const [partition, value] of [[0, "across-older"], [1, "across-middle"], [0, "across-newest"]]) {
    await produce({ value, partition });
    await page.waitForTimeout(5); // distinct timestamps
  }
  await page.getByLabel("JSON path").fill("");
  await page.getByLabel("Partition").selectOption("all");
  await page.getByLabel("From").selectOption("latest");
  await search();
  const table = page.getByRole("table", { name: "Messages" });
  await table.getByText("across-newest").waitFor();
  const values = (await columnTexts(table, "Value")).slice(0, 3);
  const partitions = (await columnTexts(table, "Partition")).slice(0, 3);
  if (values.join() !== "across-newest,across-middle,across-older") throw new Error(`values ${values}`);
  if (partitions.join() !== "0,1,0") throw new Error(`partitions ${partitions}`);
  await expectVisible(page.getByTestId("browse-summary").filter({ hasText: "Newest first, merged by timestamp across partitions" }));
  await shot("messages-all-partitions");
  await page.getByLabel("Partition").selectOption("1");
  await search();
  await table.getByText("across-middle").waitFor();
  await page.getByTestId("scan-progress").filter({ hasText: /records in partition 1 \(all of them\);/ }).waitFor();
  const only = await columnTexts(table, "Partition");
  if (!only.length || only.some((p) => p !== "1")) throw new Error(`partition filter shows ${only}`);
  await none(table.getByText("across-newest"), "a record of partition 0");
  await shot("messages-partition-filter");
});

await step("messages: a scan budget shows its progress and scans further", async () => {
  for (let i = 0; i < 40; i++) await produce({ value: `bulk-${i}`, partition: i % 2 });
  // the only record with $.hello is the oldest of its partition: 10 records a page find it late
  await page.getByLabel("Partition").selectOption("all");
  await page.getByLabel("JSON path").fill("$.hello");
  await page.getByLabel("equals").fill(""); // any value
  await page.getByLabel("Scan budget").fill("10");
  await search();
  const progress = page.getByTestId("scan-progress");
  await progress.filter({ hasText: /Scanned 10 of \d+ records in partitions 0, 1; at most 10 per search/ }).waitFor();
  await expectVisible(page.getByText("No match in the records scanned so far."));
  await shot("messages-scan-budget");
  const table = page.getByRole("table", { name: "Messages" });
  let pages = 1;
  while (!(await table.getByText("e2e-key").count())) {
    if (++pages > 12) throw new Error(`not found after ${pages - 1} pages: ${await progress.textContent()}`);
    const before = await progress.textContent();
    await page.getByRole("button", { name: "Scan further" }).click();
    await page.waitForFunction((b) => {
      const el = document.querySelector('[data-testid="scan-progress"]');
      return el && el.textContent !== b;
    }, before);
  }
  const text = await progress.textContent();
  const m = text.match(/Scanned (\d+) of (\d+)/);
  if (!m || Number(m[1]) <= 10) throw new Error(`progress after ${pages} pages: ${text}`);
  console.log(`     found after ${pages} pages: ${text}`);
  await shot("messages-scan-further");
});

await step("messages: a long value is cut in the table and opens whole, with a download", async () => {
  const long = "L".repeat(5000) + "END";
  const made = await produce({ key: "long-value", value: long, partition: 1 });
  await page.getByLabel("JSON path").fill("");
  await page.getByLabel("Scan budget").fill("10000");
  await search();
  const table = page.getByRole("table", { name: "Messages" });
  const row = table.getByRole("row").filter({ hasText: "long-value" });
  await row.getByText("5,003 characters: open the row to see all").waitFor();
  await row.click();
  const value = page.getByTestId("message-value");
  await value.waitFor();
  const shown = await value.textContent();
  if (shown !== long) throw new Error(`the open row shows ${shown.length} characters`);
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download value" }).click()]);
  const name = download.suggestedFilename();
  if (name !== `partition-1-offset-${made.offset}.txt`) throw new Error(`downloaded as ${name}`);
  const saved = await readFile(await download.path(), "utf8");
  if (saved !== long) throw new Error(`the download holds ${saved.length} characters`);
  await shot("messages-long-value");
});

await step("live tail receives new records from every partition", async () => {
  await page.getByRole("link", { name: "Live tail" }).click();
  if ((await page.getByLabel("Partition").inputValue()) !== "all") throw new Error("the tail does not start on every partition");
  await page.getByTestId("tail-status").filter({ hasText: "live" }).waitFor();
  // produce through the console API as the signed-in user (same origin, CSRF header)
  await produce({ key: "e2e-key", value: "live-tail-record" });
  await produce({ value: "live-tail-other", partition: 1 - keyPartition });
  const table = page.getByRole("table", { name: "Live records" });
  await table.getByText("live-tail-record").waitFor();
  await table.getByText("live-tail-other").waitFor();
  const partitions = new Set(await columnTexts(table, "Partition"));
  if (partitions.size !== 2) throw new Error(`tail shows partitions ${[...partitions]}`);
  await page.getByRole("button", { name: "Pause" }).click();
  await page.getByTestId("tail-status").filter({ hasText: "paused" }).waitFor();
  await page.getByRole("button", { name: "Resume" }).click();
  await page.getByTestId("tail-status").filter({ hasText: "live" }).waitFor();
  if (await page.getByText("The live tail stopped").count()) throw new Error("tail shows an error");
  await shot("live-tail");
});

await step("live tail follows one chosen partition", async () => {
  await page.getByLabel("Partition").selectOption(String(keyPartition));
  await page.getByTestId("tail-status").filter({ hasText: "live" }).waitFor();
  await produce({ value: "tail-chosen-other", partition: 1 - keyPartition });
  await produce({ key: "e2e-key", value: "tail-chosen-mine" });
  const table = page.getByRole("table", { name: "Live records" });
  await table.getByText("tail-chosen-mine").waitFor();
  await none(table.getByText("tail-chosen-other"), "a record of the other partition");
  await shot("live-tail-one-partition");
});

await step("overview shows live bytes in and out per second", async () => {
  await page.getByRole("link", { name: "Overview" }).click();
  const bytesIn = page.getByTestId("bytes-in-rate");
  const bytesOut = page.getByTestId("bytes-out-rate");
  const deadline = Date.now() + 20_000;
  for (let i = 0; Date.now() < deadline; i++) {
    // ~2 KiB in and a read back out, every half second, until two readings see them
    const w = await callApi(page, "POST", `/api/v1/console/topics/${topic}/messages`, { key: `bytes-${i}`, value: "x".repeat(2048) });
    if (w.status !== 200) throw new Error(`produce answered ${w.status}`);
    const r = await callApi(page, "GET", `/api/v1/console/topics/${topic}/messages?partition=${keyPartition}&start=latest&limit=5`);
    if (r.status !== 200) throw new Error(`browse answered ${r.status}`);
    // KiB/s: this loop's traffic, not the few bytes of the earlier steps
    if (kib(await bytesIn.textContent()) && kib(await bytesOut.textContent())) break;
    await page.waitForTimeout(500);
  }
  const [a, b] = [await bytesIn.textContent(), await bytesOut.textContent()];
  if (!kib(a) || !kib(b)) throw new Error(`bytes in ${a}, out ${b}`);
  await page.getByRole("table").filter({ hasText: "Bytes in/s" }).getByRole("link", { name: topic }).waitFor();
  console.log(`     bytes in ${a}, out ${b}`);
  await shot("overview-traffic");
});

await step("throughput tab draws", async () => {
  await page.getByRole("link", { name: "Topics" }).click();
  await page.getByRole("link", { name: topic }).click();
  await page.getByRole("link", { name: "Throughput" }).click();
  await expectVisible(page.getByRole("heading", { name: "Live messages/s" }));
  await page.waitForTimeout(4500);
  await shot("topic-throughput");
});

}

if (GROUP) {
  await step("a consumer group's lag shows", async () => {
    await page.getByRole("link", { name: "Consumer groups" }).click();
    await page.getByRole("table", { name: "Consumer groups" }).getByRole("link", { name: GROUP }).waitFor();
    await shot("groups");
    await page.getByRole("link", { name: GROUP }).click();
    const total = page.getByTestId("total-lag");
    await total.waitFor();
    const lag = Number((await total.textContent()).replace(/,/g, ""));
    if (!(lag > 0)) throw new Error(`total lag ${lag}`);
    await shot("group-detail");
  });

  await step("reset offsets: dry run, apply, undo", async () => {
    const before = await page.getByTestId("total-lag").textContent();
    await page.getByLabel("Reset to").selectOption("latest");
    await page.getByRole("button", { name: "Preview (dry run)" }).click();
    await page.getByRole("table", { name: "Reset plan" }).waitFor();
    await shot("reset-preview");
    await page.getByRole("button", { name: "Apply reset" }).click();
    await expectVisible(page.getByRole("heading", { name: "Reset applied" }));
    await page.getByTestId("total-lag").filter({ hasText: /^0$/ }).waitFor({ timeout: 20_000 });
    await shot("reset-applied");
    await page.getByRole("button", { name: "Undo this reset" }).click();
    await expectVisible(page.getByText("The reset was undone", { exact: false }));
    await page.getByTestId("total-lag").filter({ hasText: before }).waitFor({ timeout: 20_000 });
  });
} else if (!GROUP_ONLY) {
  console.log("skip consumer-group steps: no group was prepared (see the pytest output)");
  await step("groups page shows an honest state", async () => {
    await page.getByRole("link", { name: "Consumer groups" }).click();
    await expectVisible(page.getByRole("heading", { name: "Consumer groups" }));
    await shot("groups");
  });
}

if (!GROUP_ONLY) {
await step("brokers page: version, uptime, disk, counts and settings from each broker", async () => {
  await page.getByRole("link", { name: "Brokers" }).click();
  const table = page.getByRole("table", { name: "Brokers" });
  await table.getByText("up", { exact: true }).first().waitFor();
  await page.waitForFunction(() => document.querySelectorAll('table[aria-label="Brokers"] tbody tr').length === 3);
  const status = await columnTexts(table, "Status");
  if (status.join() !== "up,up,up") throw new Error(`status ${status}`);
  const versions = await columnTexts(table, "Version");
  if (!versions.every((v) => /^\d+\.\d+/.test(v))) throw new Error(`versions ${versions}`);
  const uptimes = await columnTexts(table, "Uptime");
  if (!uptimes.every((u) => /^[\d.]+ (ms|s|min|h)$/.test(u))) throw new Error(`uptimes ${uptimes}`);
  const disks = await columnTexts(table, "Disk");
  if (!disks.every((d) => /^[\d.]+ (B|KiB|MiB|GiB) in logs, [\d.]+ (KiB|MiB|GiB|TiB) free$/.test(d))) throw new Error(`disks ${disks}`);
  const leaders = (await columnTexts(table, "Leaders")).map((x) => Number(x.replace(/,/g, "")));
  if (leaders.reduce((a, b) => a + b, 0) < 1) throw new Error(`leaders ${leaders}`);
  await page.getByRole("table", { name: "Log directories of broker 1" }).getByRole("row").nth(1).waitFor();
  await page.getByText("Settings of broker 1").click();
  await page.getByRole("table", { name: "Settings of broker 1" }).getByText("max_request_bytes").waitFor();
  await none(page.getByText("cluster_secret"), "a secret setting");
  await shot("brokers");
});

await step("reports page draws stored reports", async () => {
  await page.getByRole("link", { name: "Reports" }).click();
  await expectVisible(page.getByRole("heading", { name: "Reports" }));
  const rt = process.env.REPORT_TOPIC;
  const peak = Number(process.env.PEAK_RECORDS).toLocaleString("en-GB");
  await page.getByRole("table", { name: "Peaks" }).getByRole("row").filter({ hasText: rt }).filter({ hasText: peak }).waitFor();
  await page.getByRole("table", { name: "Hot partitions" }).getByRole("row").filter({ hasText: rt }).first().waitFor();
  await page.getByRole("table", { name: "Compaction" }).getByText(`${rt}[0]`).waitFor();
  await page.getByRole("table", { name: "Report runs" }).getByText("succeeded").first().waitFor();
  await page.waitForLoadState("networkidle");
  await none(page.getByText("No rows yet", { exact: false }), "an empty report");
  const charts = await page.locator("svg.recharts-surface").count();
  const lines = await page.locator("path.recharts-line-curve").count();
  const bars = await page.locator(".recharts-bar-rectangle path").count();
  // lag, throughput, peaks, skew, compaction, retention, usage
  if (charts < 7 || lines < 4 || bars < 3) throw new Error(`charts ${charts}, lines ${lines}, bars ${bars}`);
  // time axes read as local times for people, never raw ISO timestamps
  const ticks = await page.locator(".recharts-cartesian-axis-tick-value").allTextContents();
  const iso = ticks.filter((t) => /\d{4}-\d{2}-\d{2}T\d{2}:/.test(t));
  if (ticks.length === 0 || iso.length) throw new Error(`axis ticks: ${ticks.length}, raw ISO: ${iso.slice(0, 3).join(", ")}`);
  await shot("reports");
});

await step("service account and an API key shown once", async () => {
  await page.getByRole("link", { name: "Service accounts" }).click();
  // the list first: a form filled while the page still loads can be drawn again empty
  await page.getByRole("table", { name: "Service accounts" }).getByText("demo-app").first().waitFor();
  const accountName = page.getByLabel("Name");
  const account = `e2e-sa-${Date.now().toString(36)}`;
  await accountName.fill(account);
  if ((await accountName.inputValue()) !== account) await accountName.fill(account);
  await page.getByRole("button", { name: "Create" }).click();
  await page.getByRole("table", { name: "Service accounts" }).getByText("e2e-sa-", { exact: false }).first().waitFor();
  // guard rail: the console's own account cannot be deleted or deactivated, here or by the API
  const consoleRow = page.getByRole("table", { name: "Service accounts" }).getByRole("row").filter({ hasText: "sluice-console" });
  if (!(await consoleRow.getByRole("button", { name: "Delete" }).isDisabled())) throw new Error("console account's Delete is enabled");
  if (!(await consoleRow.getByRole("button", { name: "Deactivate" }).isDisabled())) throw new Error("console account's Deactivate is enabled");
  await expectVisible(consoleRow.getByText("Protected:", { exact: false }));
  const listed = await callApi(page, "GET", "/api/v1/service-accounts/");
  const consoleAccount = listed.doc.find((a) => a.name === "sluice-console");
  for (const [method, body] of [["DELETE", undefined], ["PATCH", { is_active: false }]]) {
    const r = await callApi(page, method, `/api/v1/service-accounts/${consoleAccount.id}`, body);
    if (r.status !== 409 || r.doc?.error_code !== "PROTECTED_SERVICE_ACCOUNT") throw new Error(`${method} answered ${r.status} ${JSON.stringify(r.doc)}`);
  }
  await shot("service-accounts");
  await page.getByRole("link", { name: "API keys" }).click();
  const sa = page.getByLabel("Service account");
  const value = await sa.locator("option", { hasText: "e2e-sa-" }).first().getAttribute("value");
  await sa.selectOption(value);
  await page.getByRole("button", { name: "Create key" }).click();
  const secret = page.getByTestId("new-key");
  await secret.waitFor();
  if (!/^slk_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/.test((await secret.textContent()).trim())) throw new Error("no key shown");
  await expectVisible(page.getByRole("button", { name: "Copy" }));
  await shot("api-key-created");
  await page.getByRole("button", { name: "I have stored it" }).click();
  if ((await page.getByTestId("new-key").count()) !== 0) throw new Error("secret still shown");
  // "last used" follows use on the brokers: the console's key is only ever used there
  // (the brokers send the keys used with their heartbeats; the list polls on reload)
  const keys = page.getByRole("table", { name: "API keys" });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const accounts = await columnTexts(keys, "Service account");
    const used = await columnTexts(keys, "Last used");
    const i = accounts.findIndex((a) => a.includes("sluice-console"));
    if (i >= 0 && /^\d{4}-\d{2}-\d{2} /.test(used[i])) break;
    if (Date.now() > deadline) throw new Error(`console key last used: ${i >= 0 ? used[i] : "no console key row"}`);
    await page.waitForTimeout(2000);
    await page.reload();
    await keys.waitFor();
  }
});

await step("ACLs, quotas and the audit log", async () => {
  await page.getByRole("link", { name: "ACLs" }).click();
  await page.getByLabel("Principal").fill("User:*");
  await page.getByLabel("Resource name").fill(topic);
  await page.getByRole("button", { name: "Add ACL" }).click();
  await page.getByRole("table", { name: "ACLs" }).getByText(topic).waitFor();
  await shot("acls");
  await page.getByRole("link", { name: "Quotas" }).click();
  await page.getByRole("table", { name: "Quotas" }).waitFor();
  // the organisation's use beside its limits: topics and partitions counted, storage measured
  const orgRow = page.getByRole("table", { name: "Quotas" }).getByRole("row").filter({ hasText: "the organisation" });
  await orgRow.getByText(/^\d[\d,]* used/).first().waitFor();
  await orgRow.getByText(/ (B|KiB|MiB|GiB) used/).first().waitFor();
  await shot("quotas");
  await page.getByRole("link", { name: "Audit log" }).click();
  const events = page.getByRole("table", { name: "Audit events" });
  // the newest first: the console's test messages of the steps above, each audited
  await events.getByText("console.produce").first().waitFor();
  await page.getByLabel("Action").fill("topic.create");
  await events.getByText("topic.create").first().waitFor();
  await shot("audit");
});

await step("organisation switcher: another tenant sees none of this one's topics", async () => {
  const slug = `e2e-${Date.now().toString(36)}`;
  const status = await page.evaluate(async (slug) => {
    const csrf = document.cookie.match(/csrftoken=([^;]+)/)[1];
    const r = await fetch("/api/v1/organisations/", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify({ slug, name: `Second ${slug}` }),
    });
    return r.status;
  }, slug);
  if (status !== 201) throw new Error(`creating an organisation answered ${status}`);
  await page.reload();
  const switcher = page.getByLabel("Organisation");
  await switcher.selectOption({ label: `Second ${slug} (owner)` });
  // its overview counts none of Demo's bytes, while Demo's topic takes ~2 KiB every 0.4 s
  // (produced with Demo's API key from outside the browser: this page is the other tenant)
  await page.getByRole("link", { name: "Overview" }).click();
  for (let i = 0, until = Date.now() + 7000; Date.now() < until; i++) {
    const r = await fetch(`${URL}/api/v1/console/topics/${topic}/messages`, {
      method: "POST",
      headers: { Authorization: `Bearer ${process.env.API_KEY}`, "Content-Type": "application/json" },
      body: JSON.stringify({ key: `demo-${i}`, value: "y".repeat(2048) }),
    });
    if (r.status !== 200) throw new Error(`Demo's produce answered ${r.status}`);
    await page.waitForTimeout(400);
  }
  await page.getByTestId("bytes-in-rate").filter({ hasText: /^0 B\/s$/ }).waitFor();
  await page.getByTestId("bytes-out-rate").filter({ hasText: /^0 B\/s$/ }).waitFor();
  await shot("organisation-switched-overview");
  await page.getByRole("link", { name: "Topics" }).click();
  await expectVisible(page.getByText("No topics yet.", { exact: false }));
  if (await page.getByRole("link", { name: topic }).count()) throw new Error("another tenant's topic is listed");
  await shot("organisation-switched");
  await switcher.selectOption({ label: "Demo (owner)" });
  await page.getByRole("link", { name: "Topics" }).click();
  await page.getByRole("link", { name: topic }).waitFor();
});

await step("delete the topic with confirmation", async () => {
  await page.getByRole("link", { name: "Topics" }).click();
  await page.getByRole("button", { name: `Delete ${topic}` }).click();
  const confirm = page.getByRole("button", { name: "Delete topic" });
  if (await confirm.isEnabled()) throw new Error("delete enabled before typing the name");
  await page.getByLabel("confirmation").fill(topic);
  await confirm.click();
  await page.getByRole("link", { name: topic }).waitFor({ state: "detached" });
});

}

if (GROUP_ONLY && process.env.READER_USER) {
  const TOPIC = process.env.TOPIC;
  const ro = await newPage();

  await step("a read-only member sees no edit actions", async () => {
    await ro.goto(URL + "/");
    await ro.getByLabel("Username").fill(process.env.READER_USER);
    await ro.getByLabel("Password").fill(process.env.READER_PASSWORD);
    await ro.getByLabel("Password").press("Enter");
    await ro.getByRole("button", { name: "Sign out" }).waitFor();
    await ro.getByLabel("Organisation").selectOption({ label: "Demo (read-only)" });
    await ro.getByTestId("role").filter({ hasText: "read-only" }).waitFor();
    await none(ro.getByRole("link", { name: "Service accounts" }), "the Access menu");
    await ro.getByRole("link", { name: "Topics" }).click();
    await ro.getByRole("link", { name: TOPIC }).waitFor();
    await none(ro.getByRole("button", { name: "New topic" }), "New topic");
    await none(ro.getByRole("button", { name: `Delete ${TOPIC}` }), "Delete");
    await shot("readonly-topics", ro);
    await ro.getByRole("link", { name: TOPIC }).click();
    await ro.getByRole("table", { name: "Partitions" }).waitFor();
    await none(ro.getByRole("form", { name: "Add partitions" }), "Add partitions");
    await none(ro.getByRole("link", { name: "Produce" }), "Produce");
    await ro.getByRole("link", { name: "Configs" }).click();
    await expectVisible(ro.getByText("retention.ms"));
    await none(ro.locator("input[id^=cfg-]"), "an editable config");
    await shot("readonly-configs", ro);
    await ro.getByRole("link", { name: "Consumer groups" }).click();
    await ro.getByRole("table", { name: "Consumer groups" }).getByRole("link", { name: GROUP }).click();
    await ro.getByTestId("total-lag").waitFor();
    await none(ro.getByRole("button", { name: "Preview (dry run)" }), "the offset reset");
    await shot("readonly-group", ro);
    await ro.goto(URL + "/access/acls");
    await expectVisible(ro.getByText("Only admins and owners manage access", { exact: false }));
    await shot("readonly-access", ro);
  });

  await step("the API refuses a read-only member's write", async () => {
    const r = await callApi(ro, "POST", "/api/v1/topics/", { name: "ro-must-not-exist", partitions: 1, replication_factor: 1 });
    if (r.status !== 403 || r.doc?.error_code !== "PERMISSION_DENIED") throw new Error(`answered ${r.status} ${JSON.stringify(r.doc)}`);
    const d = await callApi(ro, "DELETE", `/api/v1/topics/${TOPIC}`);
    if (d.status !== 403) throw new Error(`delete answered ${d.status}`);
  });

  await step("an open live tail closes when the member is removed", async () => {
    await ro.goto(`${URL}/topics/${encodeURIComponent(TOPIC)}`);
    await ro.getByRole("link", { name: "Live tail" }).click();
    await ro.getByTestId("tail-status").filter({ hasText: "live" }).waitFor();
    const members = await callApi(page, "GET", "/api/v1/members/");
    const m = (members.doc || []).find((x) => x.username === process.env.READER_USER);
    if (!m) throw new Error(`no membership to remove: ${JSON.stringify(members)}`);
    const del = await callApi(page, "DELETE", `/api/v1/members/${m.id}`);
    if (del.status !== 204) throw new Error(`removing the member answered ${del.status}`);
    await ro.getByTestId("tail-status").filter({ hasText: "closed" }).waitFor({ timeout: 10_000 });
    await expectVisible(ro.getByRole("alert").filter({ hasText: "no longer a member of Demo" }));
    await shot("readonly-tail-closed", ro);
  });
  await ro.context().close();
}

await step("sign out", async () => {
  await page.getByRole("button", { name: "Sign out" }).click();
  await expectVisible(page.getByRole("heading", { name: "Sign in to Sluice" }));
});

await finish();
