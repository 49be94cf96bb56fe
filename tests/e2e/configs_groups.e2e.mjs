// Topic configs and consumer groups in the console (issue 24 items 5 and 6), against the real
// stack: the create form's replication factor (the control plane's default, as the CLI's),
// typed config editors with an edit and a reset, a group's members (client id, host,
// assignments), health badges explained, deleting an empty group, and the audit log naming
// the topic and the group and showing what changed. PHASE=configs creates the topic;
// PHASE=members runs while the test's consumer is in the group; PHASE=delete after it left.
import { URL, callApi, expectVisible, openConsole } from "./harness.mjs";

const PHASE = process.env.PHASE;
const TOPIC = process.env.CG_TOPIC; // made by this script in the configs phase
const GROUP = process.env.CG_GROUP;
const CLIENT_ID = process.env.CG_CLIENT_ID;
const { page, shot, step, signIn, finish } = await openConsole({ prefix: `configs-groups-${PHASE}-` });
const ok = (cond, what) => {
  if (!cond) throw new Error(what);
};

await step("sign in", () => signIn());

if (PHASE === "configs") {
  await step("the create form shows the control plane's default replication factor; a changed one is kept", async () => {
    const served = (await callApi(page, "GET", "/api/v1/topic-config-definitions")).doc;
    await page.goto(URL + "/topics");
    await page.getByRole("button", { name: "New topic" }).click();
    const rf = page.getByLabel("Replication factor");
    await expectVisible(page.getByText(`Default ${served.replication_factor.default} (the control plane's`, { exact: false }));
    ok((await rf.inputValue()) === String(served.replication_factor.default), `field shows ${await rf.inputValue()}, served ${JSON.stringify(served.replication_factor)}`);
    await page.getByLabel("Name").fill(TOPIC);
    await page.getByLabel("Partitions").fill("2");
    await rf.fill("2");
    await shot("create-form-replication-factor");
    await page.getByRole("button", { name: "Create topic" }).click();
    await expectVisible(page.getByText("2 partitions · replication factor 2"));
    const t = (await callApi(page, "GET", `/api/v1/topics/${TOPIC}`)).doc;
    ok(t.replication_factor === 2 && t.partitions === 2, JSON.stringify(t));
  });

  await step("typed config editors: a duration in hours, a switch, saved; then reset to default", async () => {
    await page.getByRole("link", { name: "Configs" }).click();
    const retention = page.getByLabel("retention.ms", { exact: true });
    await expectVisible(retention);
    ok((await retention.inputValue()) === "7", `retention shows ${await retention.inputValue()}`);
    ok((await page.getByLabel("retention.ms unit", { exact: true }).inputValue()) === "days", "retention in days");
    await expectVisible(page.getByText("segments whose newest record is older than this go"));
    await page.getByLabel("retention.ms unit", { exact: true }).selectOption("hours");
    await retention.fill("2");
    await page.getByRole("switch").check(); // unclean.leader.election.enable
    await page.getByLabel("compression.type", { exact: true }).selectOption("lz4");
    await shot("configs-edited");
    await page.getByRole("button", { name: "Save 3 changes" }).click();
    await expectVisible(page.getByRole("status").filter({ hasText: "Saved." }));
    let t = (await callApi(page, "GET", `/api/v1/topics/${TOPIC}`)).doc;
    ok(t.configs["retention.ms"] === "7200000" && t.configs["unclean.leader.election.enable"] === "true" && t.configs["compression.type"] === "lz4", JSON.stringify(t.configs));
    await page.getByLabel(/Overridden only \(3\)/).check();
    const rows = page.getByRole("table").first().locator("tbody tr");
    await expectVisible(page.getByRole("button", { name: "Reset retention.ms to default" }));
    ok((await rows.count()) === 3, `${await rows.count()} overridden rows`);
    await shot("configs-overridden-only");
    await page.getByRole("button", { name: "Reset retention.ms to default" }).click();
    await expectVisible(page.getByText("Reset to the default."));
    await page.getByLabel(/Overridden only \(2\)/).waitFor();
    t = (await callApi(page, "GET", `/api/v1/topics/${TOPIC}`)).doc;
    ok(!("retention.ms" in t.configs) && t.effective_configs["retention.ms"] === "604800000", JSON.stringify(t.configs));
    await shot("configs-reset");
  });
}

if (PHASE === "members") {
  await step("a group's members: client id, host and assigned partitions; delete disabled while it has members", async () => {
    await page.goto(URL + `/groups/${encodeURIComponent(GROUP)}`);
    const members = page.getByRole("table", { name: "Members" });
    await expectVisible(members);
    const row = members.locator("tbody tr").first();
    await expectVisible(row.getByText(CLIENT_ID));
    await expectVisible(row.getByText("127.0.0.1"));
    await expectVisible(row.getByRole("link", { name: TOPIC }));
    const cell = await row.locator("td").nth(4).textContent();
    ok(cell === `${TOPIC}: 0, 1`, `assigned: ${cell}`);
    ok(await page.getByRole("button", { name: "Delete group" }).isDisabled(), "delete is enabled with a member");
    await expectVisible(page.getByText("Stop its consumers first", { exact: false }));
    await shot("group-members");
  });

  await step("group names link from the groups list, and the health badges are explained", async () => {
    await page.goto(URL + "/groups");
    await page.getByRole("link", { name: GROUP }).click();
    await page.waitForURL(`**/groups/${encodeURIComponent(GROUP)}`);
    await page.goto(URL + "/groups");
    const legend = page.getByRole("list", { name: "Health badges" });
    await expectVisible(legend);
    await expectVisible(legend.getByText("no members, and records are waiting", { exact: false }));
    const badge = page.getByRole("row").filter({ hasText: GROUP }).locator(".badge");
    ok(/: /.test((await badge.getAttribute("title")) || ""), "the badge has no explanation");
    await shot("groups-legend");
  });
}

if (PHASE === "delete") {
  await step("delete the empty group, confirming with its name", async () => {
    await page.goto(URL + `/groups/${encodeURIComponent(GROUP)}`);
    await expectVisible(page.getByText("No active members", { exact: false }));
    await page.getByRole("button", { name: "Delete group" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByLabel("confirmation").fill(GROUP);
    await shot("group-delete-confirm");
    await dialog.getByRole("button", { name: "Delete group" }).click();
    await expectVisible(page.getByText(`Deleted group ${GROUP} and its committed offsets.`));
    const gone = await callApi(page, "GET", `/api/v1/groups/${encodeURIComponent(GROUP)}/`);
    ok(gone.status === 404, `group still answers ${gone.status}`);
    await shot("group-deleted");
  });

  await step("the audit log names the topic and the group and shows what changed", async () => {
    await page.goto(URL + "/access/audit");
    const table = page.getByRole("table", { name: "Audit events" });
    await expectVisible(table);
    const altered = table.getByRole("row").filter({ hasText: "topic.alter_configs" }).filter({ hasText: TOPIC });
    await expectVisible(altered);
    const t = (await callApi(page, "GET", `/api/v1/topics/${TOPIC}`)).doc;
    ok((await table.getByText(t.topic_id).count()) === 0, "a topic UUID is shown");
    await expectVisible(altered.getByRole("link", { name: TOPIC }));
    // the reset (newest) and the save of three changes
    await expectVisible(altered.getByText("retention.ms 7200000 → —"));
    const save = altered.filter({ hasText: "more" });
    await save.first().locator("td").first().click(); // the time cell: the object cell holds a link
    const changes = save.first().getByRole("table", { name: "Changes" });
    await expectVisible(changes);
    await expectVisible(changes.getByRole("row").filter({ hasText: "configs.compression.type" }).filter({ hasText: "lz4" }));
    await expectVisible(changes.getByRole("row").filter({ hasText: "configs.unclean.leader.election.enable" }));
    // what the deletion removed: the group's committed offsets as they were
    const deleted = table.getByRole("row").filter({ hasText: "group.delete" }).filter({ hasText: GROUP });
    await expectVisible(deleted.getByText(new RegExp(`committed_offsets\\.${TOPIC}/0 \\d+ → —`)));
    await shot("audit-names-and-changes");
  });
}

await finish();
