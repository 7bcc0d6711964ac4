// `<plan-approval-card>` in a real browser: Debian's Chromium, driven by
// playwright-core with that executable (no browser download), against the
// real `plan-checkpoint serve --web` built by cargo. Every field shown, a
// reload that keeps the absolute expiry, `ask` preselected and the chosen
// mode recorded, two tabs racing, cards disabled live when the plan is
// rejected, expires or the host stops, hostile agent text kept inert, and
// the server's refusals. Screenshots are kept in test-artifacts/.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { basename, join } from "node:path";
import { test, type TestContext } from "node:test";

import { chromium, type Browser, type Page } from "playwright-core";

import type { PlanApproval, PlanCheckpointClient } from "../../src/index.js";
import { packageDir, startClient, within } from "../helpers.js";

/** Debian's `chromium` package, or CHROMIUM_BIN. */
const chromiumBinary = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
/** Where screenshots are kept (CI keeps this directory as an artifact). */
const artifacts = process.env.CARD_ARTIFACTS ?? join(packageDir, "test-artifacts");

let browser: Browser | undefined;

async function launch(t: TestContext): Promise<Browser | undefined> {
  if (!existsSync(chromiumBinary)) {
    const message = `!!! ${chromiumBinary} is missing: SKIPPING the browser test "${t.name}" (apt-get install chromium)`;
    console.error(`\n${"!".repeat(message.length)}\n${message}\n${"!".repeat(message.length)}\n`);
    t.skip(message);
    return undefined;
  }
  browser ??= await chromium.launch({ executablePath: chromiumBinary, args: ["--no-sandbox"] });
  return browser;
}

test.after(async () => {
  await browser?.close();
});

interface Pending {
  client: PlanCheckpointClient;
  approval: PlanApproval;
  cardUrl: string;
  resolved: PlanApproval[];
  /** Settles with the first `plan/approvalResolved` of the approval. */
  firstResolved: Promise<PlanApproval>;
  /** The session's workspace root (the artifact is under its `.pi/plan/`). */
  dir: string;
}

/** A sidecar with the card server on a free loopback port and one pending plan. */
async function pendingPlan(
  t: TestContext,
  plan: { title?: string; question?: string; markdown?: string } = {},
  args: string[] = [],
): Promise<Pending> {
  const { client, dir } = await startClient(t, { args: ["--web", "127.0.0.1:0", ...args] });
  const resolved: PlanApproval[] = [];
  let announce: (approval: PlanApproval) => void = () => {};
  const firstResolved = new Promise<PlanApproval>((settle) => (announce = settle));
  client.on("plan/approvalResolved", ({ approval }) => {
    resolved.push(approval);
    announce(approval);
  });
  const cardUrls: string[] = [];
  client.on("plan/approvalRequested", ({ cardUrl }) => {
    if (cardUrl !== null) cardUrls.push(cardUrl);
  });
  await client.sessionCreate({ sessionId: "s-web", workspaceRoot: dir, mode: "plan" });
  const turn = await client.turnStart({ sessionId: "s-web", prompt: "plan it", origin: "interactive" });
  const { results } = await client.turnToolCalls({
    sessionId: "s-web",
    turnId: turn.turnId,
    calls: [
      {
        callId: "call-1",
        name: "SubmitPlan",
        input: {
          title: plan.title ?? "Split the parser",
          question: plan.question ?? "Proceed with the split?",
          markdown: plan.markdown ?? "# Plan\n\n1. Split the lexer from the parser.\n2. Run the tests.\n",
        },
      },
    ],
  });
  const approval = results[0]?.approval;
  assert.ok(approval, JSON.stringify(results));
  const { url } = await client.planCardUrl({ approvalId: approval.id });
  // The notification carried the same URL; the approval object carries none.
  assert.deepEqual(cardUrls, [url]);
  assert.ok(!JSON.stringify(approval).includes(url.split("/").pop() ?? "-"));
  return { client, approval, cardUrl: url, resolved, firstResolved, dir };
}

const card = (page: Page, part: string) => page.locator(`plan-approval-card ${part}`);

async function openCard(t: TestContext, url: string): Promise<Page | undefined> {
  const opened = await launch(t);
  if (opened === undefined) return undefined;
  const page = await opened.newPage();
  t.after(() => page.close());
  const response = await page.goto(url);
  assert.equal(response?.status(), 200);
  await card(page, ".title").filter({ hasText: /./ }).waitFor();
  // The first status poll has answered.
  await page.locator("plan-approval-card[data-live]").waitFor();
  return page;
}

async function statusOf(page: Page): Promise<string | null> {
  return page.locator("plan-approval-card").getAttribute("data-status");
}

async function waitForStatus(page: Page, status: string): Promise<void> {
  await page.waitForFunction(
    (wanted) => document.querySelector("plan-approval-card")?.getAttribute("data-status") === wanted,
    status,
    { timeout: 20_000 },
  );
}

async function assertDisabled(page: Page): Promise<void> {
  assert.equal(await card(page, "button.approve").isDisabled(), true);
  assert.equal(await card(page, "button.reject").isDisabled(), true);
}

function screenshot(name: string): string {
  mkdirSync(artifacts, { recursive: true });
  return join(artifacts, name);
}

test("the card shows every field, keeps its expiry on reload, preselects ask and records the chosen mode", async (t) => {
  const pending = await pendingPlan(t);
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  assert.equal(await card(page, ".title").textContent(), "Split the parser");
  assert.equal(await card(page, ".question").textContent(), "Proceed with the split?");
  await card(page, ".plan summary").click();
  assert.equal(
    await card(page, "pre.markdown").textContent(),
    "# Plan\n\n1. Split the lexer from the parser.\n2. Run the tests.\n",
  );
  assert.equal(await card(page, "time.expiry").getAttribute("data-expires-at"), String(pending.approval.expiresAt));
  assert.equal(
    await card(page, "time.expiry").getAttribute("datetime"),
    new Date(pending.approval.expiresAt).toISOString(),
  );
  assert.match((await card(page, "time.expiry").textContent()) ?? "", /\d/);
  assert.match((await card(page, ".countdown").textContent()) ?? "", /^(29m|30m) \d+s$/);
  assert.equal(await card(page, ".status").textContent(), "pending");
  assert.equal(await card(page, "select.mode").inputValue(), "ask");
  assert.deepEqual(await card(page, "select.mode option").allTextContents(), ["ask", "accept-edits", "auto"]);
  assert.equal(await card(page, "button.approve").isEnabled(), true);
  assert.equal(await card(page, "button.reject").isEnabled(), true);
  // Nothing but Approve and Reject can be pressed, and there is no text field.
  assert.deepEqual(await card(page, "button").allTextContents(), ["Approve", "Reject"]);
  assert.equal(await card(page, "input, textarea").count(), 0);
  await page.locator("plan-approval-card").screenshot({ path: screenshot("approval-card.png") });

  // A reload shows the same absolute deadline.
  await page.reload();
  await card(page, ".title").filter({ hasText: /./ }).waitFor();
  assert.equal(await card(page, "time.expiry").getAttribute("data-expires-at"), String(pending.approval.expiresAt));

  await card(page, "select.mode").selectOption("accept-edits");
  await card(page, "button.approve").click();
  await waitForStatus(page, "approved");
  assert.equal(await card(page, ".status").textContent(), "approved (accept-edits)");
  await assertDisabled(page);
  const decided = await pending.client.planGet({ approvalId: pending.approval.id });
  assert.equal(decided.status, "approved");
  assert.equal(decided.permissionMode, "accept-edits");
  await within(pending.firstResolved, 10_000, "plan/approvalResolved");
  assert.equal(pending.resolved[0]?.permissionMode, "accept-edits");
  // A used token shows the outcome, read-only.
  const again = await page.goto(pending.cardUrl);
  assert.equal(again?.status(), 200);
  await waitForStatus(page, "approved");
  await assertDisabled(page);
});

test("two tabs approving at once give exactly one decision", async (t) => {
  const pending = await pendingPlan(t);
  const first = await openCard(t, pending.cardUrl);
  const second = await openCard(t, pending.cardUrl);
  if (first === undefined || second === undefined) return;
  await second.locator("plan-approval-card select.mode").selectOption("auto");
  // Both clicks are dispatched at once, without waiting for the buttons to
  // be enabled: the first decision reaches the other tab live and disables
  // its button, and a click that waits for it would wait forever.
  await Promise.all([
    card(first, "button.approve").dispatchEvent("click"),
    card(second, "button.approve").dispatchEvent("click"),
  ]);
  // The loser's decision did not count; both tabs show the winner's.
  await waitForStatus(first, "approved");
  await waitForStatus(second, "approved");
  const decided = await pending.client.planGet({ approvalId: pending.approval.id });
  assert.equal(decided.status, "approved");
  const list = await pending.client.planList({ sessionId: "s-web" });
  assert.equal(list.approvals.length, 1);
  // Both tabs end disabled, whichever won.
  await assertDisabled(first);
  await assertDisabled(second);
  assert.ok(["ask", "auto"].includes(decided.permissionMode ?? ""));
});

test("a card is disabled live when its plan is rejected elsewhere, expires, or the host stops", async (t) => {
  const rejected = await pendingPlan(t);
  const page = await openCard(t, rejected.cardUrl);
  if (page === undefined) return;
  await rejected.client.planReject({ approvalId: rejected.approval.id });
  await waitForStatus(page, "rejected");
  assert.equal(await card(page, ".status").textContent(), "rejected");
  await assertDisabled(page);

  const expiring = await pendingPlan(t, {}, ["--approval-ttl-ms", "4000"]);
  const expiringPage = await openCard(t, expiring.cardUrl);
  if (expiringPage === undefined) return;
  assert.equal(await statusOf(expiringPage), "pending");
  await waitForStatus(expiringPage, "expired");
  await assertDisabled(expiringPage);
  const reopened = await expiringPage.goto(expiring.cardUrl);
  assert.equal(reopened?.status(), 200, "an expired card shows its outcome, read-only");
  await waitForStatus(expiringPage, "expired");
  await assertDisabled(expiringPage);

  const stopping = await pendingPlan(t);
  const stoppingPage = await openCard(t, stopping.cardUrl);
  if (stoppingPage === undefined) return;
  await stopping.client.close();
  // The stopped host's server is gone with it: the card says it cannot
  // reach its host (the next host's startup fence interrupts the approval).
  await waitForStatus(stoppingPage, "unreachable");
  assert.match((await card(stoppingPage, ".status").textContent()) ?? "", /^host unreachable/);
  await assertDisabled(stoppingPage);
  await stoppingPage.locator("plan-approval-card").screenshot({ path: screenshot("approval-card-interrupted.png") });
});

test("a hostile title, question or plan cannot inject markup or script", async (t) => {
  const pending = await pendingPlan(t, {
    title: `<img src=x onerror="window.__pwned=1">Plan`,
    question: `<b onmouseover="window.__pwned=2">Go?</b>`,
    markdown: `<script>window.__pwned=3</script>\n<img src=x onerror="window.__pwned=4">\nhidden \u202e txet \u001b[2J end\n`,
  });
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  await card(page, ".plan summary").click();
  assert.equal(await card(page, ".title").textContent(), `<img src=x onerror="window.__pwned=1">Plan`);
  assert.equal(await card(page, ".question").textContent(), `<b onmouseover="window.__pwned=2">Go?</b>`);
  const plan = (await card(page, "pre.markdown").textContent()) ?? "";
  assert.ok(plan.includes("<script>window.__pwned=3</script>"), plan);
  assert.ok(plan.includes("hidden \\u202e txet \\x1b[2J end"), plan);
  for (const tag of ["img", "script", "b"]) assert.equal(await card(page, tag).count(), 0, tag);
  assert.equal(await page.locator("img, script:not([src])").count(), 0);
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
  await page.locator("plan-approval-card").screenshot({ path: screenshot("approval-card-hostile.png") });
});

/** One raw HTTP exchange with chosen Host and Origin headers. */
function raw(
  url: URL,
  options: { method?: string; host?: string; origin?: string; body?: string },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Host: options.host ?? url.host };
    if (options.origin !== undefined) headers["Origin"] = options.origin;
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(Buffer.byteLength(options.body));
    }
    const sent = httpRequest(
      { host: url.hostname, port: url.port, path: url.pathname, method: options.method ?? "GET", headers },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
      },
    );
    sent.on("error", reject);
    sent.end(options.body);
  });
}

test("wrong tokens, a foreign Origin and a foreign Host are refused", async (t) => {
  const pending = await pendingPlan(t);
  const url = new URL(pending.cardUrl);
  const token = url.pathname.split("/").pop() ?? "";
  const opened = await launch(t);
  if (opened === undefined) return;
  const page = await opened.newPage();
  t.after(() => page.close());

  // A wrong token is a plain 404.
  const wrong = await page.goto(new URL(`/card/${"0".repeat(64)}`, url).href);
  assert.equal(wrong?.status(), 404);
  // The same server under another name (DNS rebinding) is refused.
  const rebound = await page.goto(`http://localhost:${url.port}${url.pathname}`);
  assert.equal(rebound?.status(), 421);
  assert.equal(await raw(url, { host: "evil.example" }), 421);
  // A decision from another origin is refused, with or without CORS.
  const body = JSON.stringify({ token, sha256: pending.approval.artifact?.sha256, decision: "approve", permissionMode: "auto" });
  assert.equal(await raw(new URL("/decision", url), { method: "POST", origin: "http://evil.example", body }), 403);
  await page.goto("about:blank");
  const fromElsewhere = await page.evaluate(
    async ([target, payload]) => {
      try {
        const response = await fetch(target, { method: "POST", headers: { "Content-Type": "application/json" }, body: payload });
        return response.status;
      } catch {
        return "blocked";
      }
    },
    [new URL("/decision", url).href, body] as const,
  );
  assert.equal(fromElsewhere, "blocked", "no CORS: another origin cannot even read the answer");
  const still = await pending.client.planGet({ approvalId: pending.approval.id });
  assert.equal(still.status, "pending");

  // The right origin decides once; the used token is refused after.
  assert.equal(await raw(new URL("/decision", url), { method: "POST", origin: url.origin, body }), 200);
  assert.equal(await raw(new URL("/decision", url), { method: "POST", origin: url.origin, body }), 404);
  // The used token shows the outcome read-only and decides nothing more.
  const used = await page.goto(pending.cardUrl);
  assert.equal(used?.status(), 200);
  const state = await raw(new URL(`${url.pathname}/state`, url), {});
  assert.equal(state, 200);
  const reject = JSON.stringify({ token, sha256: pending.approval.artifact?.sha256, decision: "reject" });
  assert.equal(await raw(new URL("/decision", url), { method: "POST", origin: url.origin, body: reject }), 404);
});

test("a plan rewritten while its card is open cannot be approved, and Reject still decides", async (t) => {
  const pending = await pendingPlan(t);
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  assert.equal(await card(page, "button.approve").isEnabled(), true);
  const artifact = pending.approval.artifact;
  assert.ok(artifact);
  writeFileSync(join(pending.dir, artifact.path), "# Plan\n\n1. Delete the repository.\n");
  await card(page, "button.approve").click();
  // The host re-read the file inside the decision and refused it; the card
  // shows why and cannot approve, but can still reject.
  await card(page, ".integrity").filter({ hasText: "ARTIFACT_INTEGRITY_MISMATCH" }).waitFor();
  assert.equal(await card(page, "button.approve").isDisabled(), true);
  assert.equal(await card(page, "select.mode").isDisabled(), true);
  assert.equal(await card(page, "button.reject").isEnabled(), true);
  assert.equal(await card(page, "pre.markdown").textContent(), "");
  const still = await pending.client.planGet({ approvalId: pending.approval.id });
  assert.equal(still.status, "pending");
  assert.deepEqual(pending.resolved, []);
  await page.locator("plan-approval-card").screenshot({ path: screenshot("approval-card-rewritten.png") });
  await card(page, "button.reject").click();
  await waitForStatus(page, "rejected");
  const rejected = await within(pending.firstResolved, 10_000, "plan/approvalResolved");
  assert.equal(rejected.status, "rejected");
});

test("a CRLF plan is shown as line breaks, and a 100,000-character title is refused before any card", async (t) => {
  const pending = await pendingPlan(t, { markdown: "# Plan\r\n\r\n1. Split the lexer.\r\n2. Run the tests.\r\n" });
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  await card(page, ".plan summary").click();
  assert.equal(await card(page, "pre.markdown").textContent(), "# Plan\n\n1. Split the lexer.\n2. Run the tests.\n");
  await pending.client.planReject({ approvalId: pending.approval.id });
  const next = await pending.client.turnStart({ sessionId: "s-web", prompt: "plan again", origin: "interactive" });
  const { results } = await pending.client.turnToolCalls({
    sessionId: "s-web",
    turnId: next.turnId,
    calls: [{ callId: "long", name: "SubmitPlan", input: { title: "t".repeat(100_000), question: "Go?", markdown: "# P\n" } }],
  });
  assert.equal(results[0]?.error?.code, "INVALID_PLAN_INPUT");
  assert.equal(results[0]?.approval ?? null, null);
});

test("the card shows what binds the decision: project, file, size, fingerprint and what each mode allows", async (t) => {
  const pending = await pendingPlan(t);
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  const artifact = pending.approval.artifact;
  assert.ok(artifact);
  assert.equal(await card(page, ".project").textContent(), basename(pending.dir));
  assert.equal(await card(page, ".file").textContent(), artifact.path.split("/").pop());
  assert.equal(await card(page, ".size").textContent(), `${artifact.size} bytes`);
  // The same short form as the pi dialog: "sha256 " and 16 hex digits.
  assert.equal(await card(page, ".fingerprint").textContent(), `sha256 ${artifact.sha256.slice(0, 16)}…`);
  await card(page, ".mode-help summary").click();
  const modes = await card(page, ".modes li").allTextContents();
  assert.deepEqual(modes, [
    "ask runs without asking: reading and searching files; asks first: changing files, shell commands, run by the host in its sandbox, other tools (plugins, MCP).",
    "accept-edits runs without asking: reading and searching files, changing files; asks first: shell commands, run by the host in its sandbox, other tools (plugins, MCP).",
    "auto runs without asking: reading and searching files, changing files, shell commands, run by the host in its sandbox, other tools (plugins, MCP); asks first: nothing.",
  ]);
  await page.locator("plan-approval-card").screenshot({ path: screenshot("approval-card-binding.png") });
});

test("seven cards of one host stay live at once in one browser", async (t) => {
  const first = await pendingPlan(t);
  const urls = [first.cardUrl];
  for (let index = 1; index < 7; index += 1) {
    const sessionId = `s-many-${index}`;
    await first.client.sessionCreate({ sessionId, workspaceRoot: first.dir, mode: "plan" });
    const turn = await first.client.turnStart({ sessionId, prompt: "plan it", origin: "interactive" });
    const { results } = await first.client.turnToolCalls({
      sessionId,
      turnId: turn.turnId,
      calls: [{ callId: "c", name: "SubmitPlan", input: { title: `Plan ${index}`, question: "Go?", markdown: `# Plan ${index}\n` } }],
    });
    const approval = results[0]?.approval;
    assert.ok(approval);
    urls.push((await first.client.planCardUrl({ approvalId: approval.id })).url);
  }
  // One browser context, as one browser profile: its connections per host
  // are shared by every tab.
  const opened = await launch(t);
  if (opened === undefined) return;
  const context = await opened.newContext();
  t.after(() => context.close());
  const pages: Page[] = [];
  for (const url of urls) {
    const page = await context.newPage();
    const response = await page.goto(url, { timeout: 20_000 });
    assert.equal(response?.status(), 200);
    await page.locator("plan-approval-card[data-live]").waitFor({ timeout: 20_000 });
    pages.push(page);
  }
  // Every card is live: a rejection of the first reaches it while six others stay open.
  await first.client.planReject({ approvalId: first.approval.id });
  const firstPage = pages[0];
  const lastPage = pages[6];
  assert.ok(firstPage && lastPage);
  await waitForStatus(firstPage, "rejected");
  assert.equal(await statusOf(lastPage), "pending");
  assert.equal(await card(lastPage, "button.approve").isEnabled(), true);
});

test("a host killed under its card is shown as unreachable, with the countdown stopped and both actions off", async (t) => {
  const pending = await pendingPlan(t);
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  const pid = pending.client.pid;
  assert.ok(pid !== undefined);
  process.kill(pid, "SIGKILL");
  await waitForStatus(page, "unreachable");
  assert.match((await card(page, ".status").textContent()) ?? "", /unreachable/);
  await assertDisabled(page);
  const shown = await card(page, ".countdown").textContent();
  await page.waitForTimeout(1500);
  assert.equal(await card(page, ".countdown").textContent(), shown, "the countdown stopped");
});

test("after a decision the card's URL shows the outcome read-only", async (t) => {
  const pending = await pendingPlan(t);
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  await card(page, "select.mode").selectOption("auto");
  await card(page, "button.approve").click();
  await waitForStatus(page, "approved");
  const reopened = await page.goto(pending.cardUrl);
  assert.equal(reopened?.status(), 200);
  await card(page, ".title").filter({ hasText: /./ }).waitFor();
  await waitForStatus(page, "approved");
  assert.equal(await card(page, ".status").textContent(), "approved (auto)");
  assert.match((await card(page, ".decided").textContent()) ?? "", /\d/);
  await assertDisabled(page);
  // The reopened card shows the mode that was chosen, not the default `ask`.
  assert.equal(await card(page, "select.mode").inputValue(), "auto");
  // And nothing counts down: the time left is not shown, now or later.
  const countdown = await card(page, ".countdown").textContent();
  assert.equal(countdown, "none: the plan is approved (auto)");
  await page.waitForTimeout(2200);
  assert.equal(await card(page, ".countdown").textContent(), countdown);
  await page.locator("plan-approval-card").screenshot({ path: screenshot("approval-card-decided.png") });
});

/** Every element of the card's shadow root with its box and computed text size. */
async function measure(page: Page): Promise<{ scrollWidth: number; smallest: number; targets: { name: string; width: number; height: number }[] }> {
  return page.evaluate(() => {
    const root = document.querySelector("plan-approval-card")?.shadowRoot;
    if (!root) throw new Error("no card");
    const targets = [".plan summary", ".mode-help summary", "select.mode", "button.approve", "button.reject"].map((selector) => {
      const box = root.querySelector(selector)?.getBoundingClientRect();
      return { name: selector, width: box?.width ?? 0, height: box?.height ?? 0 };
    });
    let smallest = Infinity;
    for (const node of root.querySelectorAll("*")) {
      if (!(node instanceof HTMLElement) || node.offsetParent === null || !node.textContent?.trim()) continue;
      smallest = Math.min(smallest, parseFloat(getComputedStyle(node).fontSize));
    }
    return { scrollWidth: document.documentElement.scrollWidth, smallest, targets };
  });
}

/** WCAG contrast of each text element against the card's background. */
async function contrasts(page: Page): Promise<{ name: string; ratio: number }[]> {
  return page.evaluate(() => {
    const root = document.querySelector("plan-approval-card")?.shadowRoot;
    if (!root) throw new Error("no card");
    const rgb = (color: string): number[] => (color.match(/[\d.]+/g) ?? []).slice(0, 3).map(Number);
    const luminance = (color: string): number => {
      const [r = 0, g = 0, b = 0] = rgb(color).map((v) => {
        const c = v / 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const background = (node: Element | null): string => {
      for (let at = node; at; at = at.parentElement) {
        const color = getComputedStyle(at).backgroundColor;
        if (color !== "rgba(0, 0, 0, 0)" && color !== "transparent") return color;
      }
      return getComputedStyle(document.body).backgroundColor;
    };
    return [".title", ".question", ".status", ".countdown", "dt", ".fingerprint", "button.approve", "button.reject", "select.mode", ".plan summary", "pre.markdown"].map((selector) => {
      const node = root.querySelector(selector);
      if (!node) return { name: selector, ratio: 0 };
      const fore = luminance(getComputedStyle(node).color);
      const back = luminance(background(node));
      return { name: selector, ratio: (Math.max(fore, back) + 0.05) / (Math.min(fore, back) + 0.05) };
    });
  });
}

test("on a phone: 44 px tap targets, no horizontal scroll at 320 px, text of 12 px or more, a long plan scrolling in its box", async (t) => {
  const long = Array.from({ length: 400 }, (_, index) => `${index + 1}. A step with a very-long-unbroken-identifier_${"x".repeat(80)}`).join("\n");
  const pending = await pendingPlan(t, { markdown: `# Plan\n\n${long}\n` });
  const opened = await launch(t);
  if (opened === undefined) return;
  const phone = await opened.newContext({ viewport: { width: 320, height: 640 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 });
  t.after(() => phone.close());
  const page = await phone.newPage();
  await page.goto(pending.cardUrl);
  await page.locator("plan-approval-card[data-live]").waitFor();
  await card(page, ".plan summary").tap();
  const measured = await measure(page);
  for (const target of measured.targets) {
    assert.ok(target.height >= 44 && target.width >= 44, `${target.name} is ${target.width}x${target.height}`);
  }
  assert.ok(measured.scrollWidth <= 320, `the page scrolls sideways: ${measured.scrollWidth} px`);
  assert.ok(measured.smallest >= 12, `text of ${measured.smallest} px`);
  const plan = await card(page, "pre.markdown").evaluate((node) => ({ client: node.clientHeight, scroll: node.scrollHeight, overflow: getComputedStyle(node).overflowY }));
  assert.ok(plan.scroll > plan.client && plan.overflow === "auto", `the plan scrolls inside its box: ${JSON.stringify(plan)}`);
  // Approve by touch alone.
  await card(page, "button.reject").tap();
  await waitForStatus(page, "rejected");
  await page.screenshot({ path: screenshot("approval-card-phone.png"), fullPage: false });
});

test("dark mode when the system asks for it, with text contrast of 4.5:1 or more in both schemes", async (t) => {
  const pending = await pendingPlan(t);
  const opened = await launch(t);
  if (opened === undefined) return;
  for (const colorScheme of ["light", "dark"] as const) {
    const context = await opened.newContext({ colorScheme });
    t.after(() => context.close());
    const page = await context.newPage();
    await page.goto(pending.cardUrl);
    await page.locator("plan-approval-card[data-live]").waitFor();
    await card(page, ".plan summary").click();
    const background = await card(page, "article").evaluate((node) => getComputedStyle(node).backgroundColor);
    if (colorScheme === "dark") assert.notEqual(background, "rgb(255, 255, 255)", "dark mode changes the card");
    for (const { name, ratio } of await contrasts(page)) {
      assert.ok(ratio >= 4.5, `${colorScheme}: ${name} has contrast ${ratio.toFixed(2)}`);
    }
    await page.screenshot({ path: screenshot(`approval-card-${colorScheme}.png`) });
  }
});

test("without JavaScript the page shows the title, question, deadline and plan, escaped; the deadline is announced to screen readers ahead of time", async (t) => {
  const pending = await pendingPlan(
    t,
    {
      title: "Split <b>the</b> parser",
      question: "Proceed & <i>split</i>?",
      markdown: "# Plan\r\n\r\n1. Split <script>alert(1)</script> the lexer \u001b[2J.\n2. Run the tests.\n",
    },
    ["--approval-ttl-ms", "63000"],
  );
  const opened = await launch(t);
  if (opened === undefined) return;
  const noScript = await opened.newContext({ javaScriptEnabled: false });
  t.after(() => noScript.close());
  const bare = await noScript.newPage();
  await bare.goto(pending.cardUrl);
  const shown = (await bare.locator("body").innerText()) ?? "";
  assert.match(shown, /Split <b>the<\/b> parser/, "the title, as text");
  assert.match(shown, /Proceed & <i>split<\/i>\?/, "the question, as text");
  assert.match(shown, /1\. Split <script>alert\(1\)<\/script> the lexer \\x1b\[2J\./, "the plan, as text, controls escaped");
  assert.match(shown, /2\. Run the tests\./);
  assert.match(shown, /pending/);
  assert.match(shown, /Deadline: \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/, "the absolute deadline");
  assert.match(shown, /JavaScript/, "it says what needs JavaScript");
  // Agent text is never markup: no element came from it.
  assert.equal(await bare.locator("b, i, script:not([src])").count(), 0);
  await bare.screenshot({ path: screenshot("approval-card-no-javascript.png"), fullPage: true });
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  const live = card(page, ".announce");
  assert.equal(await live.getAttribute("aria-live"), "assertive");
  await page.waitForFunction(
    () => (document.querySelector("plan-approval-card")?.shadowRoot?.querySelector(".announce")?.textContent ?? "").includes("1 minute"),
    undefined,
    { timeout: 20_000 },
  );
});

test("keyboard only: the plan opener, the mode and Approve are reached with Tab and used with keys", async (t) => {
  const pending = await pendingPlan(t);
  const page = await openCard(t, pending.cardUrl);
  if (page === undefined) return;
  const focused = () =>
    page.evaluate(() => {
      const active = document.querySelector("plan-approval-card")?.shadowRoot?.activeElement;
      return active ? `${active.tagName.toLowerCase()}${active.className ? `.${active.className}` : ""}` : "";
    });
  await page.keyboard.press("Tab");
  assert.equal(await focused(), "summary");
  await page.keyboard.press("Enter");
  assert.equal(await card(page, "details.plan").getAttribute("open"), "");
  const order: string[] = [];
  for (let step = 0; step < 3; step += 1) {
    await page.keyboard.press("Tab");
    order.push(await focused());
  }
  assert.deepEqual(order, ["select.mode", "button.approve", "button.reject"]);
  await page.keyboard.press("Shift+Tab");
  await page.keyboard.press("Shift+Tab");
  assert.equal(await focused(), "select.mode");
  await page.keyboard.press("ArrowDown");
  assert.equal(await card(page, "select.mode").inputValue(), "accept-edits");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await waitForStatus(page, "approved");
  const decided = await pending.client.planGet({ approvalId: pending.approval.id });
  assert.equal(decided.permissionMode, "accept-edits");
});
