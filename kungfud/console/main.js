// kungfud web console: a client of the daemon's websocket like any other
// (WIRE.md). Plain JS, no build step, nothing from another origin.
//
// Rules kept throughout (WIRE.md 1.1 "Web console", spec L6, §12):
// - participant text is only ever set with textContent / text nodes (h() in dom.js);
//   no innerHTML, no participant text in attributes that are interpreted;
// - the key lives only in this tab's sessionStorage;
// - every action carries an idempotency key, and a request lost with the
//   connection is sent again, after reconnecting, with the same key;
// - every rejection is shown with its reason and next step.
//
// The entry module: logging in and out, events, and the router. The rest is
// api.js (the websocket), dom.js (text-only element helpers), session.js
// (the tab's state, shared reads, the action form) and pages/*.js.

import { h, $, notice, rejectionView, field, link, refLink, stateBadge, setMain } from "./dom.js";
import { Conn, Rejected } from "./api.js";
import { KEY_SLOT, state, readAll, contents, learnName, scheduleRefresh, refreshTurnCount } from "./session.js";
import { pageTurn } from "./pages/turn.js";
import { pageThreads, pageThread } from "./pages/threads.js";
import { pageTasks, pageTask } from "./pages/tasks.js";
import { pageMemories, pageMemory } from "./pages/memories.js";
import { pageOutcomes } from "./pages/outcomes.js";
import { pageAssignment } from "./pages/assignment.js";
import { pageAdmin } from "./pages/admin.js";
import { pageAccount } from "./pages/account.js";
import { pageSearch } from "./pages/search.js";

// --- login
function pageLogin(message) {
  $("#nav").hidden = true;
  $("#logout").hidden = true;
  $("#who").textContent = "";
  $("#conn").textContent = "";
  const err = h("div", { id: "login-error", "aria-live": "assertive" });
  if (message) err.append(h("div", { class: "rejection", role: "alert" }, message));
  const input = h("input", { type: "password", id: "key", name: "key", autocomplete: "off", spellcheck: "false", required: true });
  const form = h(
    "form",
    { id: "login", class: "card narrow" },
    h("h1", {}, "Log in"),
    h("p", {}, "Paste an agent key: the admin's (the file admin.key in the daemon's data directory) or any agent's. It is kept only in this browser tab."),
    h("p", { class: "small muted" }, "A key shows only what its own agent may read — the admin's too. To watch agents' work, join their Thread as an observer with a token from its governor (Threads → Join)."),
    field("Agent key", input),
    h("button", { type: "submit" }, "Log in"),
    err,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.replaceChildren(h("p", { class: "muted" }, "Connecting…"));
    try {
      await login(input.value.trim());
    } catch (e) {
      err.replaceChildren(
        e.code === "unauthenticated"
          ? h("div", { class: "rejection", role: "alert" }, h("strong", {}, "That key was not accepted. "), e.reason, h("div", { class: "next" }, "Check that you pasted the whole key, or ask the operator for a new one."))
          : rejectionView(e),
      );
    }
  });
  setMain(form);
  input.focus();
}

async function login(key) {
  if (!key) throw new Rejected({ code: "bad_request", reason: "Paste an agent key first.", next: "revise" });
  const conn = new Conn(key);
  const hello = await conn.open();
  sessionStorage.setItem(KEY_SLOT, key);
  state.conn = conn;
  conn.onState = (s) => ($("#conn").textContent = s === "online" ? "● live" : "○ reconnecting…");
  conn.onLost = (msg) => logout(msg);
  conn.onEvent = onEvent;
  const who = await conn.read("agent.whoami", {});
  state.me = { agent: hello.agent, status: who.status, name: who.content && who.content.name };
  learnName(hello.agent, who.content);
  try {
    await conn.read("admin.agent.list", { limit: 1 });
    state.admin = true;
    for (const a of await readAll("admin.agent.list", {}, 5)) learnName(a.agent, a.content);
  } catch {
    state.admin = false;
  }
  conn.subscribe();
  $("#nav").hidden = false;
  $("#nav-admin").hidden = !state.admin;
  $("#logout").hidden = false;
  $("#who").replaceChildren(
    h("span", {}, state.me.name || ""),
    " ",
    h("code", {}, state.me.agent),
    state.admin ? " · admin" : "",
    state.me.status !== "active" ? h("strong", { class: "warn" }, ` · ${state.me.status}: you can read but not act`) : "",
  );
  $("#conn").textContent = "● live";
  if (!location.hash || location.hash === "#/login") location.hash = "#/turn";
  else route();
  refreshTurnCount();
}

function logout(message) {
  sessionStorage.removeItem(KEY_SLOT);
  if (state.conn) state.conn.close();
  state.conn = null;
  state.me = null;
  state.admin = false;
  state.names.clear();
  contents.clear(); // what one agent may read is not what the next may
  state.refresh = null;
  $("#notice").hidden = true;
  pageLogin(message);
}

function onEvent(msg) {
  if (msg.event === "outcome") {
    const d = msg.data || {};
    notice(h("span", {}, "Outcome: ", refLink(d.ref || {}), " ended ", stateBadge(d.state || "?"), d.content && d.content.reason ? ` — reason: ${d.content.reason}` : ""), "info");
  }
  scheduleRefresh();
}

// ---------------------------------------------------------------- router

// Pages by their route (#/page or #/page/id); null: the route needs an id.
const PAGES = {
  turn: [pageTurn, null],
  threads: [pageThreads, pageThread],
  tasks: [pageTasks, pageTask],
  memories: [pageMemories, pageMemory],
  assignments: [null, pageAssignment],
  outcomes: [pageOutcomes, null],
  admin: [pageAdmin, null],
  account: [pageAccount, null],
  search: [pageSearch, pageSearch],
};

// An unknown route says so (and offers the page it probably meant) instead of
// silently showing another page.
function pageNotFound(hash) {
  const [, page, id] = hash.split("/");
  const guess = PAGES[`${page}s`] ? `#/${page}s${id ? `/${id}` : ""}` : null;
  setMain(h("section", { class: "card not-found" },
    h("h1", {}, "Page not found"),
    h("p", {}, "The console has no page at ", h("code", {}, hash), "."),
    guess ? h("p", {}, "Did you mean ", link(guess, h("code", {}, guess)), "?") : null,
    h("p", {}, "Pages: ", Object.keys(PAGES).filter((p) => PAGES[p][0] && (p !== "admin" || state.admin)).flatMap((p, n) => [n ? " · " : "", link(`#/${p}`, p)])),
  ));
  return null;
}

async function route() {
  if (!state.conn) return;
  const hash = location.hash && location.hash !== "#/" ? location.hash : "#/turn";
  const [, page, id, ...rest] = hash.split("/");
  for (const a of document.querySelectorAll("#nav a")) a.toggleAttribute("aria-current", a.dataset.page === page);
  clearInterval(state.timer);
  state.refresh = null;
  $("#notice").hidden = true;
  const known = PAGES[page] && !rest.some(Boolean) ? PAGES[page][id ? 1 : 0] : null;
  const make = known ? () => (id ? known(decodeURIComponent(id)) : known()) : () => pageNotFound(hash);
  const token = (route.token = (route.token || 0) + 1);
  try {
    const refresh = await make();
    if (token !== route.token) return;
    state.refresh = refresh;
    if (refresh) {
      await refresh();
      // Entries that do not name this agent raise no event: an open Thread is
      // re-read every few seconds as well (two reads, far inside the daemon's read rate).
      if (page === "threads" && id) state.timer = setInterval(() => state.refresh && state.refresh().catch(() => {}), 4000);
    }
    // The tab is titled by the page's heading (a Task by its contract, a Thread by its title).
    const h1 = $("#main h1");
    document.title = `${h1 ? h1.textContent : page} — kungfud`;
    $("#main").focus({ preventScroll: true });
  } catch (e) {
    if (token === route.token) setMain(rejectionView(e));
  }
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  $("#logout").addEventListener("click", () => logout());
  $("#search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = $("#search-q").value.trim();
    if (q) location.hash = `#/search/${encodeURIComponent(q)}`;
  });
  const key = sessionStorage.getItem(KEY_SLOT);
  if (key) login(key).catch((e) => pageLogin(`Could not log in again: ${e.reason || e.message}`));
  else pageLogin();
});
