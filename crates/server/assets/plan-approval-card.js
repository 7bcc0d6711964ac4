// `<plan-approval-card>`: the approval card of ADR 0053 section 3 as a
// custom element, for a browser tab, an Electron renderer or a phone. It
// shows the title and question as text, the plan as the host read it after
// its size and hash check, the absolute expiry in the viewer's time zone
// with a live countdown, the live status, and only Approve (with a mode,
// `ask` preselected) and Reject.
//
// It decides nothing: the host's web server says what the approval is and
// whether a decision counts (a decision is the host's own approve/reject).
// No framework, no imports, no inline script, no HTML from the agent: every
// agent-written string reaches the DOM through `textContent`, with control
// and bidirectional characters shown escaped. The host serves this file's
// build output beside the page (`/plan-approval-card.js`).
//
// Usage: `<plan-approval-card card-url="/card/<token>">` on a page of the
// host's own origin (the server refuses requests from any other origin).
/**
 * The characters a person must not be shown raw: plan-core's
 * `is_terminal_control` (C0 and C1 controls, DEL, the bidirectional
 * embeddings, overrides, isolates and marks, the line and paragraph
 * separators). The server's tests check that this class is that set.
 */
const TERMINAL_CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/gu;
function escapeCharacter(character) {
    const code = character.codePointAt(0) ?? 0;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}
/** One line of agent text: every control and bidirectional character escaped (`\x1b`, `\u202e`). */
export function escapeLine(text) {
    return text.replace(TERMINAL_CONTROL, escapeCharacter);
}
/**
 * A block of agent text (the plan): newline and tab kept, a CR LF line end
 * shown as the line break it is, every other such character (a lone
 * carriage return too) escaped.
 */
export function escapeBlock(text) {
    return text
        .replace(/\r\n/gu, "\n")
        .replace(TERMINAL_CONTROL, (character) => (character === "\n" || character === "\t" ? character : escapeCharacter(character)));
}
/** "29m 58s", "1h 3m", "0s": the time left, never negative. */
export function formatRemaining(ms) {
    const seconds = Math.max(0, Math.floor(ms / 1000));
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    const rest = seconds % 60;
    if (hours > 0)
        return `${hours}h ${minutes}m`;
    if (minutes > 0)
        return `${minutes}m ${rest}s`;
    return `${rest}s`;
}
const STYLE = `
:host {
  color-scheme: light dark;
  --fg: #1b1b1b; --bg: #ffffff; --code-bg: #f2f2f2; --border: #8a8a8a; --alert: #a00000;
  --approve-bg: #135e2b; --approve-fg: #ffffff; --reject-fg: #8a1010; --reject-bg: #ffffff;
  display: block; max-width: 48rem; margin: 1rem auto; font: 16px/1.45 system-ui, sans-serif; color: var(--fg);
}
@media (prefers-color-scheme: dark) {
  :host {
    --fg: #ececec; --bg: #1d1f21; --code-bg: #2a2d30; --border: #8f8f8f; --alert: #ff9d96;
    --approve-bg: #1f7a3d; --approve-fg: #ffffff; --reject-fg: #ffaaa3; --reject-bg: #1d1f21;
  }
}
* { box-sizing: border-box; }
article { border: 1px solid var(--border); border-radius: 8px; padding: 1rem; background: var(--bg); color: var(--fg); }
h1 { font-size: 1.3rem; margin: 0 0 .25rem; overflow-wrap: anywhere; }
.question { margin: 0 0 1rem; overflow-wrap: anywhere; }
summary { display: list-item; min-height: 44px; min-width: 44px; padding: .6rem 0; cursor: pointer; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--code-bg); color: var(--fg); padding: .75rem; border-radius: 4px; max-height: 60vh; overflow: auto; font-size: 14px; }
dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .25rem 1rem; margin: 1rem 0; }
dt { font-weight: 600; }
dd { margin: 0; overflow-wrap: anywhere; min-width: 0; }
code { font-size: 14px; overflow-wrap: anywhere; }
.integrity, .notice { color: var(--alert); font-weight: 600; }
.actions { display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; }
label { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; }
button, select { font: inherit; font-size: 16px; min-height: 44px; min-width: 44px; padding: .4rem 1rem; border-radius: 4px; border: 1px solid var(--border); cursor: pointer; background: var(--bg); color: var(--fg); }
button.approve { background: var(--approve-bg); color: var(--approve-fg); border-color: var(--approve-bg); }
button.reject { background: var(--reject-bg); color: var(--reject-fg); border-color: var(--reject-fg); }
button:disabled, select:disabled { opacity: .5; cursor: not-allowed; }
.modes { padding-left: 1.25rem; }
.announce { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
[hidden] { display: none !important; }
`;
function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className)
        node.className = className;
    if (text !== undefined)
        node.textContent = text;
    return node;
}
function describeStatus(status) {
    switch (status.status) {
        case "pending":
            return "pending";
        case "approved":
            return status.permissionMode === null ? "approved" : `approved (${status.permissionMode})`;
        case "rejected":
            return "rejected";
        case "expired":
            return "expired";
        case "interrupted":
            return "interrupted";
    }
}
/** One mode and what it allows, as plan-core's table says (sent by the host). */
function describeMode(summary) {
    const item = element("li", "");
    item.dataset["mode"] = summary.mode;
    const name = element("strong", "", summary.mode);
    const runs = summary.runsWithoutAsking.length === 0 ? "nothing" : summary.runsWithoutAsking.join(", ");
    const asks = summary.asksFirst.length === 0 ? "nothing" : summary.asksFirst.join(", ");
    item.append(name, ` runs without asking: ${runs}; asks first: ${asks}.`);
    return item;
}
/** How long before the deadline a screen reader hears that it is near. */
const DEADLINE_WARNINGS_MS = [5 * 60_000, 60_000];
/** How often a card asks its host for the status, and how long one ask may take. */
const POLL_INTERVAL_MS = 1500;
const POLL_TIMEOUT_MS = 3000;
/** Polls after a decision of this tab that lost a race, until the outcome shows. */
const SETTLING_POLLS = 4;
function defineCard() {
    class PlanApprovalCard extends HTMLElement {
        #root;
        #title = element("h1", "title");
        #question = element("p", "question");
        #plan = element("pre", "markdown");
        #integrity = element("p", "integrity");
        #project = element("span", "project");
        #file = element("span", "file");
        #size = element("span", "size");
        #fingerprint = element("code", "fingerprint");
        #modes = element("ul", "modes");
        #expiry = element("time", "expiry");
        #countdown = element("span", "countdown");
        #status = element("span", "status");
        #mode = element("select", "mode");
        #approve = element("button", "approve", "Approve");
        #reject = element("button", "reject", "Reject");
        #notice = element("p", "notice");
        #decidedAt = element("p", "decided");
        /** Read to screen readers ahead of the deadline (visually hidden). */
        #announce = element("p", "announce");
        /** The announcement thresholds already passed. */
        #announced = new Set();
        #state = null;
        #decided = false;
        #busy = false;
        #poll = null;
        #unreachable = false;
        /**
         * Polls still owed after this tab's decision lost a race: the status
         * may briefly answer 404 while the winning decision is committed.
         */
        #settlingPolls = 0;
        #timer = null;
        constructor() {
            super();
            this.#root = this.attachShadow({ mode: "open" });
            const sheet = new CSSStyleSheet();
            sheet.replaceSync(STYLE);
            this.#root.adoptedStyleSheets = [sheet];
            const article = element("article", "card");
            const opener = element("details", "plan");
            opener.append(element("summary", "", "Open the plan"), this.#plan);
            this.#integrity.hidden = true;
            this.#integrity.setAttribute("role", "alert");
            const facts = element("dl", "facts");
            facts.append(element("dt", "", "Project"), this.#wrap(this.#project), element("dt", "", "Plan file"), this.#wrap(this.#file), element("dt", "", "Size"), this.#wrap(this.#size), element("dt", "", "Fingerprint"), this.#wrap(this.#fingerprint), element("dt", "", "Expires"), this.#wrap(this.#expiry), element("dt", "", "Time left"), this.#wrap(this.#countdown), element("dt", "", "Status"), this.#wrap(this.#status));
            this.#status.setAttribute("aria-live", "polite");
            const label = element("label", "mode-label", "Permission mode ");
            label.append(this.#mode);
            const actions = element("div", "actions");
            this.#approve.type = "button";
            this.#reject.type = "button";
            actions.append(label, this.#approve, this.#reject);
            this.#notice.hidden = true;
            this.#notice.setAttribute("role", "alert");
            const modes = element("details", "mode-help");
            modes.append(element("summary", "", "What each permission mode allows"), this.#modes);
            this.#decidedAt.hidden = true;
            this.#announce.setAttribute("aria-live", "assertive");
            this.#announce.setAttribute("aria-atomic", "true");
            article.append(this.#announce);
            article.append(this.#title, this.#question, opener, this.#integrity, facts, this.#decidedAt, actions, modes, this.#notice);
            this.#root.append(article);
            this.#approve.addEventListener("click", () => void this.#decide("approve"));
            this.#reject.addEventListener("click", () => void this.#decide("reject"));
            this.#setEnabled(false);
        }
        #wrap(child) {
            const cell = element("dd", "");
            cell.append(child);
            return cell;
        }
        connectedCallback() {
            void this.#load();
        }
        disconnectedCallback() {
            this.#stopPolling();
            this.#stopCountdown();
        }
        #stopPolling() {
            if (this.#poll !== null)
                clearTimeout(this.#poll);
            this.#poll = null;
        }
        #stopCountdown() {
            if (this.#timer !== null)
                clearInterval(this.#timer);
            this.#timer = null;
        }
        /** The card's base URL (`card-url`, relative to the page). */
        #base() {
            return new URL(this.getAttribute("card-url") ?? "", window.location.href);
        }
        async #load() {
            const base = this.#base();
            let response;
            try {
                response = await fetch(`${base.href}/state`, { cache: "no-store", credentials: "omit" });
            }
            catch {
                this.#gone("The host cannot be reached.");
                return;
            }
            if (!response.ok) {
                this.#gone("This card is no longer valid: the plan was decided, it expired, or the host stopped.");
                return;
            }
            const state = (await response.json());
            this.#state = state;
            this.#render(state);
            void this.#check(base);
        }
        #render(state) {
            this.#title.textContent = escapeLine(state.title);
            this.#question.textContent = escapeLine(state.question);
            this.#showPlan(state.plan);
            this.#project.textContent = state.project === null ? "(no project)" : escapeLine(state.project);
            this.#file.textContent = escapeLine(state.artifact.fileName);
            this.#size.textContent = `${state.artifact.size} bytes`;
            this.#fingerprint.textContent = state.artifact.fingerprint;
            this.#fingerprint.title = state.artifact.sha256;
            this.#modes.replaceChildren(...state.permissionModes.map(describeMode));
            const expires = new Date(state.expiresAt);
            this.#expiry.dateTime = expires.toISOString();
            this.#expiry.dataset["expiresAt"] = String(state.expiresAt);
            this.#expiry.textContent = new Intl.DateTimeFormat(undefined, {
                dateStyle: "medium",
                timeStyle: "long",
            }).format(expires);
            this.#mode.replaceChildren(...state.permissionModes.map(({ mode }) => {
                const option = element("option", "", mode);
                option.value = mode;
                option.selected = mode === "ask";
                return option;
            }));
            this.#mode.value = "ask";
            this.#show(state.status);
            if (!this.#decided)
                this.#startCountdown();
        }
        /** The plan as the host read it, or what its size and hash check found. */
        #showPlan(plan) {
            if (plan.ok && plan.markdown !== null) {
                this.#plan.textContent = escapeBlock(plan.markdown);
                this.#integrity.hidden = true;
            }
            else {
                this.#plan.textContent = "";
                this.#integrity.textContent = `The plan failed the host's integrity check (${plan.errorCode ?? "unknown"}): ${escapeLine(plan.message ?? "")}. It cannot be approved.`;
                this.#integrity.hidden = false;
            }
        }
        /** The countdown, from the viewer's clock to the absolute deadline. */
        #tick() {
            const state = this.#state;
            if (state === null)
                return;
            const left = state.expiresAt - Date.now();
            this.#countdown.textContent = formatRemaining(left);
            this.#announceDeadline(left);
            if (left <= 0) {
                // Past the deadline nothing can be approved; the host's own expiry
                // arrives with the next status poll.
                this.#setEnabled(false);
                if (this.#timer !== null)
                    clearInterval(this.#timer);
                this.#timer = null;
            }
        }
        /** Tells a screen reader, once per threshold, that the deadline is near. */
        #announceDeadline(left) {
            if (left <= 0 || this.#decided)
                return;
            const passed = DEADLINE_WARNINGS_MS.filter((threshold) => left <= threshold && !this.#announced.has(threshold));
            if (passed.length === 0)
                return;
            for (const threshold of passed)
                this.#announced.add(threshold);
            const nearest = Math.min(...passed);
            const minutes = Math.round(nearest / 60_000);
            this.#announce.textContent = `Less than ${minutes} ${minutes === 1 ? "minute" : "minutes"} left to decide on this plan.`;
        }
        #startCountdown() {
            this.#tick();
            if (this.#timer === null)
                this.#timer = setInterval(() => this.#tick(), 1000);
        }
        /**
         * The live status by short polling: one short request every
         * POLL_INTERVAL_MS and none held open, so any number of cards (tabs)
         * share a browser's few connections per host. A poll that fails (the
         * host stopped, crashed, or another host answers on its port) makes the
         * card say the host is unreachable, with the countdown stopped and both
         * actions off, until a poll succeeds again.
         */
        async #check(base) {
            this.#poll = null;
            let status = null;
            try {
                const controller = new AbortController();
                const abort = setTimeout(() => controller.abort(), POLL_TIMEOUT_MS);
                const response = await fetch(`${base.href}/status`, { cache: "no-store", credentials: "omit", signal: controller.signal });
                clearTimeout(abort);
                if (response.ok)
                    status = (await response.json());
            }
            catch {
                status = null;
            }
            if (!this.isConnected)
                return;
            if (status === null) {
                this.#lost();
            }
            else {
                this.#unreachable = false;
                this.dataset["live"] = "true";
                this.#show(status);
                if (!this.#decided)
                    this.#startCountdown();
            }
            // After a lost race the card keeps asking a few times, so it ends on
            // what the approval became rather than on a 404 of that moment.
            const settling = this.#decided && (status === null || status.status === "pending") && this.#settlingPolls > 0;
            if (settling)
                this.#settlingPolls -= 1;
            if (!this.#decided || settling)
                this.#poll = setTimeout(() => void this.#check(base), POLL_INTERVAL_MS);
        }
        /** The host cannot be reached: nothing shown may look decidable. */
        #lost() {
            this.#unreachable = true;
            this.#stopCountdown();
            this.#status.textContent = "host unreachable: this card cannot decide until its host answers again";
            this.dataset["status"] = "unreachable";
            this.#setEnabled(false);
        }
        #show(status) {
            this.#status.textContent = describeStatus(status);
            this.dataset["status"] = status.status;
            if (status.status !== "pending") {
                this.#decided = true;
                this.#stopPolling();
                this.#stopCountdown();
                // Nothing counts down any more: no time is "left" on a decided plan.
                this.#countdown.textContent = `none: the plan is ${describeStatus(status)}`;
                // The select shows the mode that was chosen, not the default.
                if (status.status === "approved" && status.permissionMode !== null)
                    this.#mode.value = status.permissionMode;
                if (status.decidedAt !== null) {
                    this.#decidedAt.textContent = `Decided ${new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "long" }).format(new Date(status.decidedAt))}; this card can no longer decide.`;
                    this.#decidedAt.hidden = false;
                }
            }
            this.#setEnabled(!this.#decided && !this.#busy);
        }
        #gone(message) {
            this.#decided = true;
            this.#stopPolling();
            this.#stopCountdown();
            this.#countdown.textContent = "none: this card can no longer decide";
            this.#notice.textContent = message;
            this.#notice.hidden = false;
            this.dataset["status"] = this.dataset["status"] === "pending" || !this.dataset["status"] ? "gone" : this.dataset["status"];
            this.#setEnabled(false);
        }
        /** Both actions, and the mode select; Approve also needs a plan that passed its check. */
        #setEnabled(enabled) {
            const state = this.#state;
            const live = enabled && !this.#unreachable && state !== null && state.expiresAt > Date.now();
            this.#approve.disabled = !(live && state !== null && state.plan.ok);
            this.#mode.disabled = this.#approve.disabled;
            this.#reject.disabled = !live;
        }
        async #decide(decision) {
            const state = this.#state;
            if (state === null || this.#decided || this.#busy)
                return;
            this.#busy = true;
            this.#setEnabled(false);
            const token = this.#base().pathname.split("/").pop() ?? "";
            const body = { token, sha256: state.artifact.sha256, decision };
            // The select offers exactly the modes the host's state listed.
            if (decision === "approve")
                body.permissionMode = this.#mode.value;
            try {
                const response = await fetch(new URL("/decision", this.#base()).href, {
                    method: "POST",
                    headers: { "Content-Type": "application/json" },
                    body: JSON.stringify(body),
                    cache: "no-store",
                    credentials: "omit",
                });
                if (response.ok) {
                    const answer = (await response.json());
                    this.#busy = false;
                    this.#show(answer.status);
                    return;
                }
                if (response.status === 404) {
                    // Decided elsewhere (another tab won), expired or stopped: nothing
                    // more can be decided here, and the next status poll, still
                    // scheduled, shows what the approval became.
                    this.#busy = false;
                    this.#decided = true;
                    this.#stopCountdown();
                    this.#countdown.textContent = "none: this card can no longer decide";
                    this.#settlingPolls = SETTLING_POLLS;
                    if (this.#poll === null)
                        this.#poll = setTimeout(() => void this.#check(this.#base()), POLL_INTERVAL_MS);
                    this.#notice.textContent = "This decision did not count: the plan was already decided, it expired, or the host stopped.";
                    this.#notice.hidden = false;
                    this.#setEnabled(false);
                    return;
                }
                const refusal = (await response.json());
                // The host re-read the plan for the refusal: a file rewritten since
                // the card opened is shown as failing its check, and Approve stays off.
                if (refusal.plan !== undefined) {
                    this.#state = { ...state, plan: refusal.plan };
                    this.#showPlan(refusal.plan);
                }
                this.#notice.textContent = `The host refused: ${refusal.errorCode ?? response.status} ${escapeLine(refusal.message ?? "")}`;
                this.#notice.hidden = false;
            }
            catch {
                this.#notice.textContent = "The host cannot be reached.";
                this.#notice.hidden = false;
            }
            this.#busy = false;
            this.#setEnabled(!this.#decided);
        }
    }
    if (customElements.get("plan-approval-card") === undefined) {
        customElements.define("plan-approval-card", PlanApprovalCard);
    }
}
// In Node (the package's tests import the helpers above) there is no DOM.
if (typeof customElements !== "undefined")
    defineCard();
