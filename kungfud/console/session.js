// The logged-in tab: its state (connection, who, names), the reads every page
// shares, and the action form — every action carries an idempotency key kept
// while the same request is retried, and every rejection is shown where the
// action was taken. The key lives only in this tab's sessionStorage (KEY_SLOT).

import { h, $, notice, rejectionView } from "./dom.js";
import { newKey } from "./api.js";

const KEY_SLOT = "kungfu.key";

// ---------------------------------------------------------------- state

const state = { conn: null, me: null, admin: false, names: new Map(), page: null, refresh: null, timer: null };

// Read every page of a list read (bounded: at most `max` pages).
async function readAll(op, args, max = 10) {
  const items = [];
  let cursor = null;
  for (let i = 0; i < max; i++) {
    const page = await state.conn.read(op, { ...args, cursor, limit: 100 });
    items.push(...page.items);
    cursor = page.cursor;
    if (cursor === null) break;
  }
  return items;
}

// fn over items, at most `width` at a time: the daemon answers a connection's
// requests beyond its in-flight limit with rate_limited.
async function pool(items, width, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}
const TITLED = 200; // list rows that get a title (one extra read each)
// Content of objects that never change under that name (a Thread's content is
// fixed at creation; a Memory version is immutable): read once per tab, so
// list refreshes stay within the daemon's read rate.
const contents = new Map();
async function cachedContent(name, readIt, pick = (got) => got.content) {
  if (!contents.has(name)) {
    const got = await readIt().catch(() => null);
    if (!got) return undefined;
    if (contents.size > 2000) contents.clear();
    contents.set(name, pick(got));
  }
  return contents.get(name);
}

// One entry, as thread.entry shows it to this agent.
const readEntry = (thread, n) => state.conn.read("thread.entry", { thread, entry: n });
// The newest `count` (≤ 100) entries of a Thread, oldest first.
async function recentEntries(thread, count) {
  const page = await state.conn.read("thread.entries", { thread, newest_first: true, limit: count, full: true });
  return page.items.reverse();
}

// Agents' names (WIRE.md 1.2 "Names beside ids"): learned from what this tab
// may read — its own (agent.whoami), the members of a Thread it reads
// (thread.get's members carry content.name where the daemon sends it) and, for
// an admin, admin.agent.list. Nothing else is asked for: an agent the tab
// learned no name for is shown by its id. Bounded; forgotten at log-out.
const MAX_NAMES = 5000;
function learnName(agent, content) {
  const name = content && typeof content.name === "string" ? content.name : null;
  if (!agent || !name) return;
  if (state.names.size >= MAX_NAMES && !state.names.has(agent)) state.names.clear(), lookalikes.clear();
  state.names.set(agent, name);
  const group = lookalikes.get(skeleton(name)) || new Set();
  lookalikes.set(skeleton(name), group.add(agent));
}

// Names that only look alike ("alice", "аlice" with a Cyrillic а): Unicode's
// confusable skeleton (UTS #39) over the table the CLI uses too
// (kungfud/wire/names.py); every agent in a group of two or more is shown
// with its id. Invisible and control characters are shown as \uXXXX.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\u034F\u115F\u1160\u17B4\u17B5\u3164\uFFA0\u180B-\u180F\uFE00-\uFE0F\u{E0100}-\u{E01EF}]/gu;
const lookalikes = new Map(); // skeleton -> agents
let table = {};
fetch(new URL("./confusables.json", import.meta.url)).then((r) => r.json()).then((t) => { table = t; }, () => {});
function skeleton(name) {
  const text = name.normalize("NFKC").normalize("NFD").replace(INVISIBLE, "");
  return Array.from(text, (c) => table[c] || c).join("").normalize("NFD");
}
const visible = (name) => name.replace(INVISIBLE, (c) => `\\u${c.codePointAt(0).toString(16).padStart(4, "0")}`);
const learnMembers = (members) => (members || []).forEach((m) => learnName(m.agent, m.content));

// A Thread's title and its members' names, read with thread.get: the title
// once per tab (a Thread's content never changes), the names each time it is
// read. A Thread the agent cannot read gives undefined.
async function threadTitle(thread) {
  return cachedContent(`title:${thread}`, async () => {
    const t = await state.conn.read("thread.get", { thread });
    learnMembers(t.members);
    return t;
  }, (t) => (t.content && (t.content.title || t.content.text)) || "");
}

// An agent: its name where this tab knows it, with the id one click away
// (the name is a button that shows or hides the id); otherwise the id.
function agentLabel(id) {
  if (!id) return h("span", {}, "—");
  const name = state.names.get(id);
  const me = state.me && id === state.me.agent ? " (you)" : "";
  const code = h("code", { class: "agent-id" }, id);
  if (!name) return h("span", { class: "agent", "data-agent": id }, code, me);
  const alike = (lookalikes.get(skeleton(name)) || new Set()).size > 1;
  code.hidden = !alike; // a name that looks like another's always shows its id
  const toggle = h("button", { type: "button", class: `link agent-name${alike ? " confusable" : ""}`, title: id, "aria-expanded": String(alike) }, visible(name));
  toggle.addEventListener("click", (ev) => {
    ev.preventDefault();
    code.hidden = !code.hidden;
    toggle.setAttribute("aria-expanded", String(!code.hidden));
  });
  return h("span", { class: "agent", "data-agent": id }, toggle, " ", code, me);
}

// An action form: submits with Enter (and Ctrl+Enter in text areas), shows
// the receipt or the rejection in place. The idempotency key is kept while the
// same request is retried and renewed once it succeeded or the request changed.
function actionForm(opts) {
  const { label, fields, build, onDone, cls, confirmText } = opts;
  const out = h("div", { class: "result", "aria-live": "polite" });
  const button = h("button", { type: "submit", class: opts.danger ? "danger" : "" }, label);
  const form = h("form", { class: `action ${cls || ""}` }, fields || [], button, out);
  let key = null,
    lastText = null;
  form.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && ev.target.tagName === "TEXTAREA") {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    out.replaceChildren();
    let req;
    try {
      req = build(form);
    } catch (e) {
      out.replaceChildren(rejectionView({ code: "bad_request", reason: e.message, next: "revise" }));
      return;
    }
    if (!req) return;
    if (confirmText && !confirm(confirmText)) return;
    const text = JSON.stringify(req);
    if (text !== lastText) key = newKey();
    lastText = text;
    button.disabled = true;
    try {
      const result = await state.conn.act(req.op, req.args, key);
      key = null;
      lastText = null;
      const shown = onDone ? onDone(result, form) : null;
      out.replaceChildren(shown instanceof Node ? shown : h("span", { class: "ok" }, "Done."));
      if (opts.reset !== false) {
        for (const el of form.querySelectorAll("textarea, input[type=text], input[type=number]")) el.value = "";
        for (const el of form.querySelectorAll("input[type=checkbox]:checked")) {
          el.checked = false;
          el.dispatchEvent(new Event("change"));
        }
      }
      scheduleRefresh();
    } catch (e) {
      out.replaceChildren(rejectionView(e));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function scheduleRefresh() {
  clearTimeout(scheduleRefresh.t);
  scheduleRefresh.t = setTimeout(() => {
    if (state.refresh) state.refresh().catch(showError);
    refreshTurnCount();
  }, 150);
}
function showError(e) {
  notice(rejectionView(e), "error");
}

async function refreshTurnCount() {
  if (!state.conn) return;
  try {
    const page = await state.conn.read("turn", { limit: 100 });
    $("#turn-count").textContent = page.items.length ? `${page.items.length}${page.cursor ? "+" : ""}` : "";
  } catch {
    /* shown on the page itself */
  }
}

export { KEY_SLOT, state, readAll, pool, TITLED, contents, cachedContent, readEntry, recentEntries, learnName, learnMembers, threadTitle, agentLabel, actionForm, scheduleRefresh, showError, refreshTurnCount };
