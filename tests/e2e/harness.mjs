// What every console Playwright script shares: headless Chromium with the flags this machine
// needs, one page per context, numbered screenshots under ARTIFACTS, steps that print
// `ok`/`FAIL` lines (pytest greps them) and stop at the first failure with a screenshot, browser
// errors and CSP refusals collected as failures, and a same-origin API call as the signed-in
// person. Scripts are driven by tests/e2e/*.py through conftest's `browse_script`.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export const URL = process.env.SLUICE_URL;
export const ARTIFACTS = process.env.ARTIFACTS;

const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"];

export const expectVisible = (locator) => locator.first().waitFor({ state: "visible" });
export const none = async (locator, what) => {
  if ((await locator.count()) !== 0) throw new Error(`${what} is shown`);
};

// a same-origin API call as the page's signed-in person (session cookie, CSRF header)
export const callApi = (p, method, path, body) =>
  p.evaluate(async ({ method, path, body }) => {
    const csrf = (document.cookie.match(/csrftoken=([^;]+)/) || [])[1] || "";
    const r = await fetch(path, {
      method,
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, doc: await r.json().catch(() => null) };
  }, { method, path, body });

/** Launch Chromium and open one page; screenshots are named `<prefix><nn>-<name>.png`. */
export async function openConsole({ prefix = "", viewport = { width: 1366, height: 800 } } = {}) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args: ARGS });
  const problems = [];
  const watch = (p) => {
    p.on("console", (m) => {
      if (m.type() === "error" && /Content Security Policy|Refused to/.test(m.text())) problems.push(`CSP: ${m.text()}`);
    });
    p.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  };
  const newPage = async (size = viewport) => {
    const context = await browser.newContext({ viewport: size });
    const p = await context.newPage();
    p.setDefaultTimeout(15_000);
    watch(p);
    return p;
  };
  const page = await newPage();
  let n = 0;
  const shot = async (name, p = page) => {
    n += 1;
    await p.screenshot({ path: join(ARTIFACTS, `${prefix}${String(n).padStart(2, "0")}-${name}.png`), fullPage: true });
  };
  const step = async (name, fn) => {
    const t = Date.now();
    try {
      await fn();
      console.log(`ok   ${name} (${Date.now() - t} ms)`);
    } catch (e) {
      console.log(`FAIL ${name}: ${e.stack || e}`);
      await page.screenshot({ path: join(ARTIFACTS, `FAILED-${prefix}${name.replace(/\W+/g, "-")}.png`), fullPage: true }).catch(() => {});
      await browser.close();
      process.exit(1);
    }
  };
  /** Sign in on `p` with the password form; picks `organisation` when the switcher asks,
   * and returns once the console shows it. */
  const signIn = async (p = page, user = process.env.SLUICE_USER, password = process.env.SLUICE_PASSWORD, organisation = "Demo (owner)") => {
    await p.goto(URL + "/");
    await p.getByLabel("Username").fill(user);
    await p.getByLabel("Password").fill(password);
    await p.getByLabel("Password").press("Enter");
    await p.getByRole("button", { name: "Sign out" }).waitFor();
    const choose = p.getByText("Choose an organisation above", { exact: false });
    if (await choose.count()) {
      await p.getByLabel("Organisation").selectOption({ label: organisation });
      // the switch is a POST: a navigation before its answer would cancel it
      await choose.waitFor({ state: "detached" });
    }
  };
  /** Close the browser; a non-zero exit when the browser reported problems. */
  const finish = async () => {
    await browser.close();
    if (problems.length) {
      console.log("FAIL browser reported problems:\n" + problems.join("\n"));
      process.exit(1);
    }
    console.log(`done: ${n} screenshots in ${ARTIFACTS}`);
  };
  return { browser, page, newPage, watch, shot, step, signIn, finish, screenshots: () => n };
}
