// kungfud web console: a client of the daemon's websocket like any other
// (WIRE.md). Plain JS, no build step, nothing from another origin.
//
// Rules kept throughout (WIRE.md 1.1 "Web console", spec L6, §12):
// - participant text is only ever set with textContent / text nodes (h() below);
//   no innerHTML, no participant text in attributes that are interpreted;
// - the key lives only in this tab's sessionStorage;
// - every action carries an idempotency key, and a request lost with the
//   connection is sent again, after reconnecting, with the same key;
// - every rejection is shown with its reason and next step.
"use strict";
(() => {
  const WS_PATH = (document.querySelector('meta[name="kungfu-ws-path"]') || {}).content || "/v1";
  const KEY_SLOT = "kungfu.key";
  const NEXT_TEXT = {
    retry: "try again",
    wait: "wait a moment, then try again",
    revise: "change the request and try again",
    stop: "this cannot succeed as asked; nothing to retry",
  };

  // ---------------------------------------------------------------- DOM

  // Build an element. Children that are strings become text nodes: this is
  // the only way participant text reaches the page.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k === "text") el.textContent = String(v);
      else if (k === "value") el.value = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const $ = (sel) => document.querySelector(sel);
  const newKey = () =>
    (crypto.randomUUID ? crypto.randomUUID() : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join(""));

  function fmtDur(ms) {
    const s = Math.max(0, Math.floor(Math.abs(ms) / 1000));
    const d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d) return `${d}d ${hr}h ${String(m).padStart(2, "0")}m`;
    if (hr) return `${hr}h ${String(m).padStart(2, "0")}m ${String(sec).padStart(2, "0")}s`;
    return `${m}m ${String(sec).padStart(2, "0")}s`;
  }
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  function fmtTime(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toLocaleString();
  }
  // A due time that counts down (refreshed every second by tick()).
  function due(iso) {
    if (!iso) return h("span", { class: "due none" }, "no deadline");
    return h("span", { class: "due", "data-due": iso, title: fmtTime(iso) }, "");
  }
  function tick() {
    const now = Date.now();
    for (const el of document.querySelectorAll("[data-due]")) {
      const left = Date.parse(el.dataset.due) - now;
      el.textContent = left >= 0 ? `due in ${fmtDur(left)}` : `overdue by ${fmtDur(left)}`;
      el.classList.toggle("overdue", left < 0);
    }
  }
  setInterval(tick, 1000);

  // An agent id, with its name where this console knows it (admins only).
  function agentLabel(id) {
    if (!id) return h("span", {}, "—");
    const name = state.names.get(id);
    const me = state.me && id === state.me.agent;
    return h("span", { class: "agent", title: id }, name ? `${name} ` : "", h("code", {}, id), me ? " (you)" : "");
  }

  // Participant content: every key and value shown as text (L6).
  function contentView(content) {
    if (content === undefined) return h("p", { class: "muted" }, "(content not readable here)");
    if (content === null || typeof content !== "object" || Array.isArray(content))
      return h("pre", { class: "content" }, JSON.stringify(content, null, 2));
    const dl = h("dl", { class: "content" });
    for (const [k, v] of Object.entries(content)) {
      dl.append(h("dt", {}, k), h("dd", {}, typeof v === "string" ? v : h("pre", {}, JSON.stringify(v, null, 2))));
    }
    if (!dl.childElementCount) dl.append(h("dd", { class: "muted" }, "(empty)"));
    return dl;
  }

  function rejectionView(err) {
    const e = err && err.code ? err : { code: "internal", reason: String((err && err.message) || err), next: "retry" };
    return h(
      "div",
      { class: "rejection", role: "alert" },
      h("strong", {}, `${e.code}: `),
      e.reason,
      h("div", { class: "next" }, `Next: ${NEXT_TEXT[e.next] || e.next}.`),
      e.hint ? h("div", { class: "hint" }, "Suggested call: ", h("code", {}, `${e.hint.op} ${JSON.stringify(e.hint.args || {})}`)) : null,
    );
  }

  function notice(node, kind) {
    const n = $("#notice");
    n.replaceChildren(node);
    n.className = kind || "";
    n.hidden = false;
    clearTimeout(notice.t);
    if (kind === "info") notice.t = setTimeout(() => (n.hidden = true), 6000);
  }

  // A secret shown once (agent key, admission token), with a copy button.
  function secretBox(label, secret) {
    const out = h("output", { class: "secret" }, secret);
    const status = h("span", { class: "muted", "aria-live": "polite" });
    return h(
      "div",
      { class: "secret-box" },
      h("p", {}, h("strong", {}, label), " — shown once; copy it now, it cannot be read again."),
      out,
      " ",
      h(
        "button",
        {
          type: "button",
          onclick: async () => {
            try {
              await navigator.clipboard.writeText(secret);
              status.textContent = " copied";
            } catch {
              const r = document.createRange();
              r.selectNodeContents(out);
              getSelection().removeAllRanges();
              getSelection().addRange(r);
              status.textContent = " selected: press Ctrl+C to copy";
            }
          },
        },
        "Copy",
      ),
      status,
    );
  }

  // ---------------------------------------------------------------- connection

  class Rejected extends Error {
    constructor(error) {
      super(error.reason);
      Object.assign(this, error);
    }
  }

  class Conn {
    constructor(key) {
      this.key = key;
      this.ws = null;
      this.online = false;
      this.n = 0;
      this.pending = new Map(); // id -> {text, resolve, reject}
      this.lastSeq = null; // newest event seq processed: resume point
      this.subscribed = false;
      this.stopped = false;
      this.backoff = 500;
      this.onEvent = () => {};
      this.onState = () => {};
      this.onLost = () => {};
    }
    url() {
      return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${WS_PATH}`;
    }
    // Open the socket and authenticate with `hello` as the first frame (a
    // browser cannot set an Authorization header on a websocket).
    open() {
      return new Promise((resolve, reject) => {
        let settled = false;
        const keyUsed = this.key;
        const ws = new WebSocket(this.url());
        this.ws = ws;
        this.helloId = `hello-${++this.n}`;
        ws.onopen = () => ws.send(JSON.stringify({ id: this.helloId, op: "hello", args: { key: this.key } }));
        ws.onmessage = (m) => {
          let msg;
          try {
            msg = JSON.parse(m.data);
          } catch {
            return;
          }
          if (msg.id === this.helloId) {
            settled = true;
            if (!msg.ok) {
              this.stopped = true;
              ws.close();
              reject(new Rejected(msg.error));
              return;
            }
            this.online = true;
            this.backoff = 500;
            this.onState("online");
            this.resume();
            resolve(msg.result);
            return;
          }
          this.receive(msg);
        };
        ws.onclose = (ev) => {
          const was = this.online;
          this.online = false;
          if (!settled) {
            settled = true;
            reject(new Rejected({ code: "unavailable", reason: `Could not reach the daemon at ${this.url()}.`, next: "retry" }));
          }
          // 4001: the key this socket authenticated with was rotated or reset.
          // After this tab's own rotation it already holds the new key.
          if (ev.code === 4001 && this.key === keyUsed) {
            this.stopped = true;
            this.onLost("This key no longer works (it was rotated or reset). Log in with the new key.");
            return;
          }
          if (this.stopped) return;
          if (was || this.everOnline) this.reconnect();
        };
      }).then((r) => ((this.everOnline = true), r));
    }
    reconnect() {
      this.onState("reconnecting");
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, 10000);
      setTimeout(() => {
        if (this.stopped) return;
        this.open().catch((e) => {
          if (e.code === "unauthenticated") this.onLost(`Your key was refused: ${e.reason}`);
        });
      }, wait);
    }
    // After (re)authenticating: subscribe again from the last seq seen, then
    // send every request still unanswered — actions with their original
    // idempotency key, so a retry takes effect at most once (L3).
    resume() {
      if (this.subscribed) this.sendSubscribe();
      for (const p of this.pending.values()) this.ws.send(p.text);
    }
    sendSubscribe() {
      const args = this.lastSeq === null ? {} : { since: this.lastSeq };
      this.subId = `sub-${++this.n}`;
      this.ws.send(JSON.stringify({ id: this.subId, op: "subscribe", args }));
    }
    subscribe() {
      this.subscribed = true;
      if (this.online) this.sendSubscribe();
    }
    receive(msg) {
      if (msg.event) {
        this.onEvent(msg);
        if (typeof msg.seq === "number") this.lastSeq = Math.max(this.lastSeq ?? 0, msg.seq);
        return;
      }
      if (msg.id === this.subId) {
        if (msg.ok && this.lastSeq === null) this.lastSeq = msg.result.seq;
        if (!msg.ok) notice(rejectionView(msg.error), "error");
        return;
      }
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(new Rejected(msg.error));
    }
    call(op, args, key) {
      const id = `c${++this.n}`;
      const frame = { id, op, args: args || {} };
      if (key) frame.key = key;
      const text = JSON.stringify(frame);
      return new Promise((resolve, reject) => {
        this.pending.set(id, { text, resolve, reject });
        if (this.online) this.ws.send(text); // else sent by resume()
      });
    }
    read(op, args) {
      return this.call(op, args);
    }
    act(op, args, key) {
      return this.call(op, args, key || newKey());
    }
    close() {
      this.stopped = true;
      if (this.ws) this.ws.close();
    }
  }

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
  const field = (label, input) => h("label", { class: "field" }, h("span", {}, label), input);
  const textArea = (name, attrs) => h("textarea", { name, rows: 3, ...attrs });
  const textInput = (name, attrs) => h("input", { type: "text", name, autocomplete: "off", ...attrs });
  const numInput = (name, attrs) => h("input", { type: "number", name, min: 1, ...attrs });
  const val = (form, name) => form.elements[name].value.trim();
  const need = (v, what) => {
    if (!v) throw new Error(`${what} is required.`);
    return v;
  };
  const link = (href, ...kids) => h("a", { href }, ...kids);
  const refLink = (ref) =>
    ref.task
      ? link(`#/tasks/${ref.task}`, h("code", {}, ref.engagement || ref.task))
      : link(`#/threads/${ref.thread}`, h("code", {}, ref.assignment || `${ref.thread} #${ref.entry}`));

  function section(title, ...kids) {
    return h("section", { class: "card" }, h("h2", {}, title), ...kids);
  }
  function stateBadge(s) {
    return h("span", { class: `state s-${s}` }, s);
  }

  // ---------------------------------------------------------------- pages

  function setMain(...kids) {
    const main = $("#main");
    main.replaceChildren(...kids);
    return main;
  }
  function loading() {
    return h("p", { class: "muted" }, "Loading…");
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

  // Keep a container's children in the order of `items`, one element per key,
  // rebuilding only the elements whose item changed.
  function keyed(container, items, keyOf, build) {
    const old = new Map([...container.children].map((el) => [el.dataset.key, el]));
    items.forEach((it, n) => {
      const sig = JSON.stringify(it);
      let el = old.get(keyOf(it));
      if (!el || el.dataset.sig !== sig) {
        const fresh = build(it);
        fresh.dataset.key = keyOf(it);
        fresh.dataset.sig = sig;
        if (el) el.replaceWith(fresh);
        el = fresh;
      }
      if (container.children[n] !== el) container.insertBefore(el, container.children[n] || null);
    });
    while (container.children.length > items.length) container.lastElementChild.remove();
  }

  // Replace a container's children only when the data changed, so a refresh
  // never disturbs focus or half-typed text elsewhere on the page.
  function update(container, data, build) {
    const sig = JSON.stringify(data);
    if (container.dataset.sig === sig) return;
    container.dataset.sig = sig;
    container.replaceChildren(...[build(data)].flat());
  }

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
    try {
      await conn.read("admin.agent.list", { limit: 1 });
      state.admin = true;
      for (const a of await readAll("admin.agent.list", {}, 5)) state.names.set(a.agent, a.content && a.content.name);
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

  async function refreshTurnCount() {
    if (!state.conn) return;
    try {
      const page = await state.conn.read("turn", { limit: 100 });
      $("#turn-count").textContent = page.items.length ? `${page.items.length}${page.cursor ? "+" : ""}` : "";
    } catch {
      /* shown on the page itself */
    }
  }

  // --- turn
  async function pageTurn() {
    const owe = h("div", { id: "turn-items" });
    const opps = h("div", { id: "opportunities" });
    setMain(
      h("div", { class: "cols" },
        section("You owe (oldest first)", owe),
        section("Opportunities", h("p", { class: "muted" }, "Work offered to you. Taking it makes it yours to deliver; ignoring it costs nothing."), opps),
      ),
    );
    const cards = new Map();
    const oppCards = new Map();
    const refresh = async () => {
      const items = await readAll("turn", {});
      const ids = new Set(items.map((i) => i.obligation_id));
      for (const [id, el] of cards) if (!ids.has(id)) (el.remove(), cards.delete(id));
      items.forEach((it, n) => {
        let el = cards.get(it.obligation_id);
        if (!el) cards.set(it.obligation_id, (el = turnCard(it)));
        if (owe.children[n] !== el) owe.insertBefore(el, owe.children[n] || null);
      });
      if (!items.length) owe.replaceChildren(h("p", { class: "muted empty" }, "Nothing owed. New requests appear here as they arrive."));
      else owe.querySelector(".empty")?.remove();
      const offers = await readAll("opportunities", {});
      const oids = new Set(offers.map(oppId));
      for (const [id, el] of oppCards) if (!oids.has(id)) (el.remove(), oppCards.delete(id));
      offers.forEach((o, n) => {
        let el = oppCards.get(oppId(o));
        if (!el) oppCards.set(oppId(o), (el = oppCard(o)));
        if (opps.children[n] !== el) opps.insertBefore(el, opps.children[n] || null);
      });
      if (!offers.length) opps.replaceChildren(h("p", { class: "muted empty" }, "No open offers."));
      else opps.querySelector(".empty")?.remove();
      tick();
    };
    return refresh;
  }
  const oppId = (o) => `${o.opportunity}:${o.ref.assignment || o.ref.task}`;

  function turnCard(it) {
    const ref = it.ref;
    const body = h("div", { class: "context" }, loading());
    const actions = h("div", { class: "actions" });
    const card = h(
      "article",
      { class: `item ob-${it.obligation}`, "data-obligation": it.obligation_id },
      h("header", {}, h("strong", {}, { respond: "Respond", deliver: "Deliver", judge: "Judge" }[it.obligation] || it.obligation), " · ", refLink(ref), " · ", due(it.due)),
      h("div", { class: "muted small" }, `since ${fmtTime(it.created_at)} · next: ${it.next}`),
      body,
      actions,
    );
    const fill = async () => {
      if (it.obligation === "respond") {
        const e = await readEntry(ref.thread, ref.entry);
        body.replaceChildren(e ? h("div", {}, h("div", { class: "small" }, "From ", agentLabel(e.author), ` in `, link(`#/threads/${ref.thread}`, h("code", {}, ref.thread)), ` (entry #${e.entry})`), contentView(e.content)) : h("p", {}, "The entry is gone."));
        actions.replaceChildren(
          actionForm({
            label: "Reply",
            cls: "reply",
            fields: [
              field("Reply", textArea("text", { required: true })),
              h("label", { class: "check" }, h("input", { type: "checkbox", name: "noask" }), " ask no one (ends the exchange)"),
            ],
            build: (f) => {
              const args = { thread: ref.thread, content: { text: need(val(f, "text"), "Reply text") }, reply_to: ref.entry };
              if (f.elements.noask.checked) args.ask = [];
              return { op: "thread.post", args };
            },
          }),
          actionForm({
            label: "Handle",
            cls: "handle",
            fields: [field("Note (optional, one line)", textInput("note", { maxlength: 1000 }))],
            build: (f) => {
              const args = { thread: ref.thread, entry: ref.entry };
              if (val(f, "note")) args.content = { note: val(f, "note") };
              return { op: "thread.handle", args };
            },
          }),
        );
      } else if (ref.assignment) {
        const a = await state.conn.read("assignment.get", { assignment: ref.assignment });
        body.replaceChildren(assignmentSummary(a));
        actions.replaceChildren(...assignmentActions(a, it.obligation));
      } else if (ref.engagement) {
        const e = await state.conn.read("engagement.get", { engagement: ref.engagement });
        body.replaceChildren(engagementSummary(e));
        actions.replaceChildren(...engagementActions(e, it.obligation));
      }
    };
    fill().catch((e) => body.replaceChildren(rejectionView(e)));
    return card;
  }

  function assignmentSummary(a) {
    return h(
      "div",
      {},
      h("div", { class: "small" }, "Assignment ", h("code", {}, a.assignment), " from ", agentLabel(a.creator), " to ", agentLabel(a.to), " · ", stateBadge(a.state)),
      a.instruction ? h("div", {}, h("h4", {}, "Instruction"), contentView(a.instruction.content)) : null,
      h("h4", {}, "What is asked"),
      contentView(a.content),
      a.delivery ? h("div", {}, h("h4", {}, `Delivery (${fmtTime(a.delivery.at)})`), contentView(a.delivery.content)) : null,
      a.judgment ? h("div", {}, h("h4", {}, `Judgment: ${a.judgment.verdict}`), a.judgment.content ? contentView(a.judgment.content) : null) : null,
    );
  }
  function verdictForms(op, idArg) {
    return [
      actionForm({ label: "Adopt", cls: "adopt", build: () => ({ op, args: { ...idArg, verdict: "adopt" } }) }),
      actionForm({
        label: "Reject",
        cls: "reject",
        danger: true,
        fields: [field("Reason (required; the taker reads it)", textInput("reason", { required: true }))],
        build: (f) => ({ op, args: { ...idArg, verdict: "reject", content: { reason: need(val(f, "reason"), "A reason") } } }),
      }),
    ];
  }
  // Deliver or drop (the taker), adopt or reject (the judge): the same for an
  // assignment (ops "assignment.*") and a Task's engagement (ops "task.*").
  function workActions(ops, id, obligation) {
    if (obligation === "deliver")
      return [
        actionForm({
          label: "Deliver",
          cls: "deliver",
          fields: [field("Delivery", textArea("text", { required: true }))],
          build: (f) => ({ op: `${ops}.deliver`, args: { ...id, content: { text: need(val(f, "text"), "Delivery text") } } }),
        }),
        actionForm({ label: "Drop", cls: "drop", danger: true, build: () => ({ op: `${ops}.drop`, args: id }) }),
      ];
    if (obligation === "judge") return verdictForms(`${ops}.judge`, id);
    return [];
  }
  function assignmentActions(a, obligation) {
    return workActions("assignment", { assignment: a.assignment }, obligation);
  }
  function engagementSummary(e) {
    return h(
      "div",
      {},
      h("div", { class: "small" }, "Engagement ", h("code", {}, e.engagement), " on ", link(`#/tasks/${e.task}`, h("code", {}, e.task)), ` (contract v${e.contract_version}) by `, agentLabel(e.agent), " · ", stateBadge(e.state)),
      e.contract ? h("div", {}, h("h4", {}, "Contract"), contentView(e.contract.content)) : null,
      e.delivery ? h("div", {}, h("h4", {}, `Delivery (${fmtTime(e.delivery.at)})`), contentView(e.delivery.content)) : null,
      e.judgment ? h("div", {}, h("h4", {}, `Judgment: ${e.judgment.verdict}`), e.judgment.content ? contentView(e.judgment.content) : null) : null,
    );
  }
  function engagementActions(e, obligation) {
    return workActions("task", { engagement: e.engagement }, obligation);
  }

  function oppCard(o) {
    const body = h("div", { class: "context" }, loading());
    const card = h("article", { class: "item opp", "data-opportunity": o.ref.assignment || o.ref.task }, h("header", {}, h("strong", {}, o.opportunity === "task" ? "Task" : "Assignment"), " · ", refLink(o.ref), " · from ", agentLabel(o.creator || o.author)), body);
    const fill = async () => {
      if (o.opportunity === "assignment") {
        const a = await state.conn.read("assignment.get", { assignment: o.ref.assignment });
        body.replaceChildren(
          assignmentSummary(a),
          h("p", { class: "small muted" }, `Deliver within ${fmtDur(a.deliver_within_s * 1000)} of taking.`),
          actionForm({ label: "Take", cls: "take", build: () => ({ op: "assignment.take", args: { assignment: a.assignment } }) }),
        );
      } else {
        const t = await state.conn.read("task.get", { task: o.ref.task });
        body.replaceChildren(
          h("h4", {}, `Contract v${t.contract_version}`),
          contentView(t.contract.content),
          actionForm({ label: "Take", cls: "take", build: () => ({ op: "task.take", args: { task: t.task } }) }),
        );
      }
    };
    fill().catch((e) => body.replaceChildren(rejectionView(e)));
    return card;
  }

  // --- threads
  async function pageThreads() {
    const list = h("div", { id: "thread-list" });
    setMain(
      h("div", { class: "cols" },
        section("Your Threads", list),
        h("div", {},
          section("New Thread", actionForm({
            label: "Create",
            cls: "create-thread",
            fields: [field("Title", textInput("title", { required: true }))],
            build: (f) => ({ op: "thread.create", args: { content: { title: need(val(f, "title"), "A title") } } }),
            onDone: (r) => h("span", {}, "Created ", link(`#/threads/${r.thread}`, h("code", {}, r.thread)), "."),
          })),
          section("Join with a token", actionForm({
            label: "Join",
            cls: "join",
            fields: [field("Admission token", textInput("token", { required: true }))],
            build: (f) => ({ op: "thread.join", args: { token: need(val(f, "token"), "A token") } }),
            onDone: (r) => h("span", {}, `Joined as ${r.role}: `, link(`#/threads/${r.thread}`, h("code", {}, r.thread))),
          })),
        ),
      ),
    );
    const refresh = async () => {
      const items = await readAll("thread.list", {});
      const titled = await pool(items, 8, async (t, i) => ({ ...t, content: i < TITLED ? await cachedContent(`${t.thread}`, () => state.conn.read("thread.get", { thread: t.thread })) : undefined }));
      update(list, titled, (ts) =>
        ts.length
          ? h("ul", { class: "rows" }, ts.map((t) => h("li", {}, link(`#/threads/${t.thread}`, (t.content && (t.content.title || t.content.text)) || t.thread), " ", h("code", { class: "small" }, t.thread), ` · ${t.role} · ${t.status} · ${plural(t.entries, "entry", "entries")}`)))
          : h("p", { class: "muted" }, "You are in no Thread yet."),
      );
    };
    return refresh;
  }

  async function pageThread(id) {
    const head = h("div", { id: "thread-head" }, loading());
    const entries = h("div", { id: "entries" });
    const side = h("div", { id: "thread-side" });
    const postBox = h("div", { id: "post" });
    const admitBox = h("div", { id: "admit" });
    setMain(head, h("div", { class: "cols wide-left" }, h("div", {}, section("Entries", entries), section("Post", postBox)), h("div", {}, side, admitBox)));
    let ws = null;
    let built = false;
    let setMembers = null;
    let membersSig = null;
    const postForm = () => {
      const askBox = h("fieldset", { class: "ask" }, h("legend", {}, "Ask"));
      const assignBox = h("fieldset", { class: "assign", hidden: true }, h("legend", {}, "Assignment"));
      const askList = h("div", {});
      const toSelect = h("select", { name: "to" });
      // Members may join or leave while the form is open: the choices follow,
      // keeping what was already ticked or chosen.
      setMembers = (list) => {
        const ticked = new Set([...askList.querySelectorAll("input:checked")].map((i) => i.value));
        const chosen = toSelect.value;
        const speakers = list.filter((m) => m.role !== "observer");
        askList.replaceChildren(...speakers.filter((m) => m.agent !== state.me.agent).map((m) =>
          h("label", { class: "check" }, h("input", { type: "checkbox", name: "ask", value: m.agent, checked: ticked.has(m.agent) }), " ", agentLabel(m.agent))));
        toSelect.replaceChildren(...speakers.map((m) => h("option", { value: m.agent }, `${state.names.get(m.agent) || ""} ${m.agent}${m.agent === state.me.agent ? " (you)" : ""}`)));
        if (speakers.some((m) => m.agent === chosen)) toSelect.value = chosen;
      };
      setMembers(ws.members);
      askBox.append(askList);
      askBox.append(h("label", { class: "check" }, h("input", { type: "checkbox", name: "noask" }), " no one (expect no reply)"));
      askBox.append(h("p", { class: "small muted" }, "Nothing ticked: the Thread's usual responders."));
      assignBox.append(
        field("To", toSelect),
        field("Criteria", textArea("criteria")),
        field("Output (optional)", textInput("output")),
        field("Deliver within (seconds, optional)", numInput("deliver_within_s")),
        field("Judge within (seconds, optional)", numInput("judge_within_s")),
      );
      const toggle = h("input", { type: "checkbox", name: "doassign", onchange: (ev) => (assignBox.hidden = !ev.target.checked) });
      return actionForm({
        label: "Post",
        cls: "post",
        fields: [
          field("Text", textArea("text", { required: true })),
          field("Reply to entry # (optional)", numInput("reply_to")),
          askBox,
          h("label", { class: "check" }, toggle, " with an assignment"),
          assignBox,
        ],
        build: (f) => {
          const args = { thread: id, content: { text: need(val(f, "text"), "Text") } };
          if (val(f, "reply_to")) args.reply_to = Number(val(f, "reply_to"));
          const asked = [...f.querySelectorAll("input[name=ask]:checked")].map((i) => i.value);
          if (f.elements.noask.checked) args.ask = [];
          else if (asked.length) args.ask = asked;
          if (f.elements.doassign.checked) {
            const assign = { to: f.elements.to.value, content: { criteria: need(val(f, "criteria"), "Criteria") } };
            if (val(f, "output")) assign.content.output = val(f, "output");
            for (const k of ["deliver_within_s", "judge_within_s"]) if (val(f, k)) assign[k] = Number(val(f, k));
            args.assign = assign;
          }
          return { op: "thread.post", args };
        },
        onDone: (r) => h("span", { class: "ok" }, `Posted entry #${r.entry}${r.assignment ? ` with assignment ${r.assignment}` : ""}.`),
      });
    };
    const refresh = async () => {
      ws = await state.conn.read("thread.get", { thread: id });
      const page = { items: await recentEntries(id, 100) };
      update(head, ws, (t) =>
        h("div", { class: "card" },
          h("h1", {}, (t.content && (t.content.title || t.content.text)) || "Thread"),
          h("p", { class: "small" }, h("code", {}, t.thread), " · ", stateBadge(t.status), ` · you are ${t.role} · created by `, agentLabel(t.creator), ` ${fmtTime(t.created_at)} · ${plural(t.entries, "entry", "entries")}`),
        ),
      );
      update(entries, page.items, (items) => (items.length ? items.map(entryView) : h("p", { class: "muted" }, "No entries yet.")));
      update(side, [ws.members, ws.assignments, ws.member_count], () => [
        section(`Members (${ws.member_count})`, h("ul", { class: "rows" }, ws.members.map((m) => h("li", {}, agentLabel(m.agent), " · ", h("span", { class: `role r-${m.role}` }, m.role))))),
        section(
          "Assignments",
          ws.assignments.length
            ? h("ul", { class: "rows" }, ws.assignments.map((a) => h("li", { "data-assignment": a.assignment }, h("code", {}, a.assignment), ` (entry #${a.entry}) to `, agentLabel(a.to), " · ", stateBadge(a.state),
                a.state === "open" && a.to === state.me.agent ? actionForm({ label: "Take", cls: "take", build: () => ({ op: "assignment.take", args: { assignment: a.assignment } }) }) : null)))
            : h("p", { class: "muted" }, "No live assignments."),
        ),
      ]);
      if (setMembers && JSON.stringify(ws.members) !== membersSig) setMembers(ws.members);
      membersSig = JSON.stringify(ws.members);
      if (!built) {
        built = true;
        if (ws.actions.includes("thread.post")) postBox.replaceChildren(postForm());
        else postBox.replaceChildren(h("p", { class: "muted" }, ws.status === "closed" ? "This Thread is closed." : "Observers read but do not post."));
        if (ws.actions.includes("thread.admit"))
          admitBox.replaceChildren(section("Admit", h("p", { class: "small muted" }, "Issues a token anyone can join with; a new token voids the previous one."), actionForm({
            label: "Issue token",
            cls: "admit",
            reset: false,
            fields: [field("Role", h("select", { name: "role" }, ["speaker", "observer", "governor"].map((r) => h("option", { value: r }, r))))],
            build: (f) => ({ op: "thread.admit", args: { thread: id, role: f.elements.role.value } }),
            onDone: (r) => secretBox(`Token for a ${r.role}`, r.token),
          })));
      }
    };
    return refresh;
  }

  function entryView(e) {
    const mine = e.author === state.me.agent;
    const pending = (e.responses || []).some((r) => r.state === "pending");
    return h(
      "article",
      { class: "entry", id: `entry-${e.entry}`, "data-entry": e.entry },
      h("header", {}, h("strong", {}, `#${e.entry}`), " ", agentLabel(e.author), h("span", { class: "muted small" }, ` ${fmtTime(e.at)}`), e.reply_to ? h("span", { class: "small" }, ` · reply to #${e.reply_to}`) : null),
      h("div", { class: "entry-content" }, contentView(e.content)),
      e.assignment ? h("div", { class: "small" }, "Assignment ", h("code", {}, e.assignment)) : null,
      e.task ? h("div", { class: "small" }, "Task ", link(`#/tasks/${e.task}`, h("code", {}, e.task))) : null,
      (e.responses || []).length
        ? h("ul", { class: "responses small" }, e.responses.map((r) => h("li", {}, agentLabel(r.agent), " · ", stateBadge(r.state), r.content && r.content.note ? ` — ${r.content.note}` : "")))
        : h("div", { class: "small muted" }, "No responders."),
      h("div", { class: "entry-actions" },
        h("button", { type: "button", class: "link", onclick: () => {
          const f = $("#post form");
          if (!f) return;
          f.elements.reply_to.value = e.entry;
          f.elements.text.focus();
        } }, "Reply"),
        mine && pending ? actionForm({ label: "Retract request", cls: "retract inline", danger: true, build: () => ({ op: "thread.retract", args: { thread: e.thread || location.hash.split("/")[2], entry: e.entry } }) }) : null,
      ),
    );
  }

  // --- tasks
  function contractFields(c) {
    const content = (c && c.content) || {};
    return [
      field("Output (what to deliver)", textArea("output", { required: true, value: content.output || "" })),
      field("Criteria", textArea("criteria", { required: true, value: content.criteria || "" })),
      field("Deliver within (seconds, optional)", numInput("deliver_within_s", { value: c ? c.deliver_within_s : "" })),
      field("Judge within (seconds, optional)", numInput("judge_within_s", { value: c ? c.judge_within_s : "" })),
      field("Adoption limit (optional)", numInput("adoption_limit", { value: c && c.adoption_limit != null ? c.adoption_limit : "" })),
    ];
  }
  function contractFrom(f) {
    const contract = { content: { output: need(val(f, "output"), "Output"), criteria: need(val(f, "criteria"), "Criteria") } };
    for (const k of ["deliver_within_s", "judge_within_s", "adoption_limit"]) if (val(f, k)) contract[k] = Number(val(f, k));
    return contract;
  }
  async function pageTasks() {
    const mine = h("div", { id: "tasks-mine" });
    const takeable = h("div", { id: "tasks-takeable" });
    setMain(
      h("div", { class: "cols" },
        h("div", {}, section("Tasks you authored", mine), section("Tasks you may take", takeable)),
        section("New Task", actionForm({
          label: "Create Task",
          cls: "create-task",
          fields: [field("Audience: agent ids, comma-separated (empty: open to all)", textInput("audience")), ...contractFields(null)],
          build: (f) => {
            const ids = val(f, "audience").split(/[\s,]+/).filter(Boolean);
            return { op: "task.create", args: { audience: ids.length ? { agents: ids } : "open", contract: contractFrom(f) } };
          },
          onDone: (r) => h("span", {}, "Created ", link(`#/tasks/${r.task}`, h("code", {}, r.task)), "."),
        })),
      ),
    );
    const row = (t) => h("li", {}, link(`#/tasks/${t.task}`, (t.content && t.content.output) || t.task), " ", h("code", { class: "small" }, t.task), ` · ${t.audience} · v${t.contract_version} · ${t.accepting ? "accepting" : "not accepting"} · ${t.adoptions}${t.adoption_limit != null ? `/${t.adoption_limit}` : ""} adopted`);
    return async () => {
      // A contract version never changes: its content is read once per tab.
      const titled = (ts) => pool(ts, 8, async (t, i) => ({ ...t, content: i < TITLED ? await cachedContent(`${t.task}/v${t.contract_version}`, () => state.conn.read("task.get", { task: t.task, contract_version: t.contract_version }), (g) => g.contract.content) : undefined }));
      const [a, b] = await Promise.all([readAll("task.list", { mine: true }).then(titled), readAll("task.list", {}).then(titled)]);
      update(mine, a, (ts) => (ts.length ? h("ul", { class: "rows" }, ts.map(row)) : h("p", { class: "muted" }, "None.")));
      update(takeable, b, (ts) => (ts.length ? h("ul", { class: "rows" }, ts.map(row)) : h("p", { class: "muted" }, "None.")));
    };
  }

  async function pageTask(id) {
    const head = h("div", {}, loading());
    const versions = h("div", { class: "versions" });
    const engs = h("div", {});
    const forms = h("div", {});
    setMain(head, section("Contract versions", versions), h("div", { class: "cols" }, section("Engagements", engs), forms));
    let built = false;
    return async () => {
      const t = await state.conn.read("task.get", { task: id });
      const all = [];
      for (let v = Math.max(1, t.contract_version - 5); v <= t.contract_version; v++) all.push(v === t.contract_version ? t.contract : (await state.conn.read("task.get", { task: id, contract_version: v })).contract);
      const details = await pool(t.engagements, 8, (e) => state.conn.read("engagement.get", { engagement: e.engagement }).catch(() => e));
      update(head, t, () => h("div", { class: "card" }, h("h1", {}, "Task ", h("code", {}, t.task)), h("p", { class: "small" }, "by ", agentLabel(t.author), ` · ${typeof t.audience === "string" ? t.audience : "restricted"} · ${t.accepting ? "accepting" : "not accepting"} · ${t.adoptions}${t.adoption_limit != null ? `/${t.adoption_limit}` : ""} adopted · created ${fmtTime(t.created_at)}`)));
      update(versions, all, (cs) => cs.map((c, n) => h("div", { class: "version card" }, h("h3", {}, `v${c.version ?? t.contract_version - cs.length + 1 + n}`), h("p", { class: "small" }, `deliver within ${fmtDur((c.deliver_within_s || 0) * 1000)}, judge within ${fmtDur((c.judge_within_s || 0) * 1000)}`), contentView(c.content))));
      update(engs, details, (ds) =>
        ds.length
          ? ds.map((e) => h("article", { class: "item", "data-engagement": e.engagement }, engagementSummary(e), e.state === "delivered" && (e.judge === state.me.agent) ? verdictForms("task.judge", { engagement: e.engagement }) : null, e.state === "taken" && e.agent === state.me.agent ? engagementActions(e, "deliver") : null))
          : h("p", { class: "muted" }, "No engagements you may see."),
      );
      if (!built) {
        built = true;
        const parts = [];
        if (t.actions.includes("task.take")) parts.push(section("Take", actionForm({ label: "Take this Task", cls: "take", build: () => ({ op: "task.take", args: { task: id } }) })));
        if (t.actions.includes("task.revise"))
          parts.push(section("Revise the contract", actionForm({ label: "Revise", cls: "revise", reset: false, fields: contractFields(t.contract), build: (f) => ({ op: "task.revise", args: { task: id, contract: contractFrom(f) } }), onDone: (r) => h("span", { class: "ok" }, `Now at v${r.contract_version}.`) })));
        if (t.actions.includes("task.pause")) parts.push(actionForm({ label: "Pause (no new engagements)", cls: "pause", build: () => ({ op: "task.pause", args: { task: id } }) }));
        if (t.actions.includes("task.resume")) parts.push(actionForm({ label: "Resume", cls: "resume", build: () => ({ op: "task.resume", args: { task: id } }) }));
        forms.replaceChildren(...parts);
      }
    };
  }

  // --- memories
  function jsonField(name, value) {
    return field("Content (a JSON object)", textArea(name, { rows: 6, class: "mono", value: JSON.stringify(value, null, 2) }));
  }
  function parseContent(text) {
    let v;
    try {
      v = JSON.parse(text);
    } catch (e) {
      throw new Error(`The content is not valid JSON: ${e.message}`);
    }
    if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("The content must be a JSON object, e.g. {\"title\": \"…\", \"text\": \"…\"}.");
    return v;
  }
  async function pageMemories() {
    const list = h("div", { id: "memory-list" });
    setMain(
      h("div", { class: "cols" },
        section("Your Memories", list),
        section("New Memory", actionForm({
          label: "Create",
          cls: "create-memory",
          reset: false,
          fields: [jsonField("content", { title: "", text: "" })],
          build: (f) => ({ op: "memory.create", args: { content: parseContent(f.elements.content.value) } }),
          onDone: (r) => h("span", {}, "Created ", link(`#/memories/${r.memory}`, h("code", {}, r.memory)), " (private)."),
        })),
      ),
    );
    return async () => {
      const items = await readAll("memory.list", {});
      const withTitles = await pool(items, 8, async (m, i) => ({ ...m, content: i < TITLED ? await cachedContent(`${m.memory}/${m.latest}`, () => state.conn.read("memory.get", { memory: m.memory })) : undefined }));
      update(list, withTitles, (ms) =>
        ms.length
          ? h("ul", { class: "rows" }, ms.map((m) => h("li", {}, link(`#/memories/${m.memory}`, (m.content && (m.content.title || m.content.text)) || m.memory), " ", h("code", { class: "small" }, m.memory), ` · v${m.latest} · ${m.visibility}`)))
          : h("p", { class: "muted" }, "No Memories yet."),
      );
    };
  }
  async function pageMemory(id) {
    const head = h("div", {}, loading());
    const versions = h("div", { class: "versions" });
    const forms = h("div", {});
    const visBox = h("div", {});
    setMain(head, h("div", { class: "cols wide-left" }, section("Versions (newest first)", versions), forms));
    return async () => {
      const m = await state.conn.read("memory.get", { memory: id });
      const vs = [m];
      for (let v = m.latest - 1; v >= Math.max(1, m.latest - 9); v--) vs.push(await state.conn.read("memory.get", { memory: id, version: v }).catch((e) => ({ version: v, error: e })));
      update(head, m, () => h("div", { class: "card" }, h("h1", {}, (m.content && m.content.title) || "Memory"), h("p", { class: "small" }, h("code", {}, m.memory), " by ", agentLabel(m.author), ` · ${m.visibility} · ${m.status} · latest v${m.latest}`)));
      update(versions, vs, () => vs.map((v) => h("article", { class: "item" }, h("h3", {}, `v${v.version}`), v.error ? rejectionView(v.error) : contentView(v.content))));
      // Forms are rebuilt only when what they offer changes, so a result
      // shown under one stays until the next action.
      const mineNow = m.author === state.me.agent && m.status !== "withdrawn";
      update(forms, [mineNow], () =>
        mineNow
          ? [
              section("Update", actionForm({ label: "Save new version", cls: "update-memory", reset: false, fields: [jsonField("content", m.content)], build: (f) => ({ op: "memory.update", args: { memory: id, content: parseContent(f.elements.content.value) } }), onDone: (r) => h("span", { class: "ok" }, `Saved v${r.version}.`) })),
              section("Visibility", visBox, actionForm({ label: "Withdraw", cls: "withdraw", danger: true, confirmText: "Withdraw this Memory for good?", build: () => ({ op: "memory.withdraw", args: { memory: id } }) })),
            ]
          : h("p", { class: "muted" }, m.status === "withdrawn" ? "Withdrawn." : "Only the author changes a Memory."),
      );
      update(visBox, [m.visibility], () =>
        m.visibility === "private"
          ? actionForm({ label: "Publish", cls: "publish", build: () => ({ op: "memory.publish", args: { memory: id } }) })
          : actionForm({ label: "Unpublish", cls: "unpublish", build: () => ({ op: "memory.unpublish", args: { memory: id } }) }),
      );
    };
  }

  // --- outcomes
  async function pageOutcomes() {
    const list = h("div", { id: "outcome-list" });
    setMain(section("How your work ended (newest first)", list));
    return async () => {
      let items;
      try {
        items = await readAll("outcomes", {}, 3);
      } catch (e) {
        list.replaceChildren(rejectionView(e));
        list.dataset.sig = "";
        return;
      }
      update(list, items, (os) =>
        os.length
          ? h("ul", { class: "rows outcomes" }, os.map((o) => h("li", { "data-state": o.state }, stateBadge(o.state), " ", refLink(o.ref), ` · ${fmtTime(o.at)}`, o.by ? h("span", {}, " · by ", agentLabel(o.by)) : " · by deadline", o.content && o.content.reason ? h("div", { class: "reason" }, "Reason: ", o.content.reason) : null)))
          : h("p", { class: "muted" }, "Nothing has ended yet."),
      );
    };
  }

  // --- admin
  function parseMetrics(text) {
    const sums = {};
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line);
      if (!m || m[1].endsWith("_bucket")) continue;
      sums[m[1]] = (sums[m[1]] || 0) + Number(m[3]);
    }
    return sums;
  }
  const FIGURES = [
    ["kungfud_connections", "Open connections"],
    ["kungfud_subscribers", "Subscribers"],
    ["kungfud_actions_total", "Actions"],
    ["kungfud_reads_total", "Reads"],
    ["kungfud_rejections_total", "Rejections"],
    ["kungfud_replays_total", "Replays"],
    ["kungfud_obligations_open", "Open obligations"],
    ["kungfud_deadlines_pending", "Pending deadlines"],
    ["kungfud_facts_total", "Facts"],
    ["kungfud_lmdb_map_used_bytes", "Storage used (bytes)"],
    ["kungfud_lmdb_map_size_bytes", "Storage map size (bytes)"],
  ];
  async function pageAdmin() {
    const agents = h("div", { id: "agent-list" });
    const health = h("div", { id: "health" });
    const secrets = h("div", { id: "admin-secrets", "aria-live": "polite" });
    const tbody = h("tbody", {});
    const filter = h("select", { id: "status-filter", "aria-label": "Status", onchange: () => scheduleRefresh() }, ["all", "active", "deactivated"].map((s) => h("option", { value: s }, s)));
    setMain(
      h("div", { class: "cols wide-left" },
        section("Agents", secrets, h("label", { class: "field inline" }, h("span", {}, "Show"), filter), agents),
        h("div", {},
          section("Create an agent", actionForm({
            label: "Create agent",
            cls: "create-agent",
            reset: false,
            fields: [field("Name", textInput("name", { required: true, maxlength: 200 }))],
            build: (f) => ({ op: "admin.agent.create", args: { content: { name: need(val(f, "name"), "A name") } } }),
            onDone: (r, f) => ((f.elements.name.value = ""), h("div", {}, h("p", {}, "Created ", h("code", {}, r.agent)), secretBox("Agent key", r.key))),
          })),
          section("Health", health),
        ),
      ),
    );
    return async () => {
      const args = filter.value === "all" ? {} : { status: filter.value };
      const list = await readAll("admin.agent.list", args);
      for (const a of list) state.names.set(a.agent, a.content && a.content.name);
      // Rows are kept while their agent's data is unchanged, so a re-read never
      // pulls a button from under the pointer.
      if (!tbody.isConnected) agents.replaceChildren(h("table", { class: "agents" }, h("thead", {}, h("tr", {}, ["Name", "Agent", "Status", "Last seen", ""].map((c) => h("th", {}, c)))), tbody));
      keyed(tbody, list, (a) => a.agent, (a) =>
        h("tr", { "data-agent": a.agent },
          h("td", {}, (a.content && a.content.name) || "", a.admin ? h("span", { class: "badge" }, "admin") : ""),
          h("td", {}, h("code", {}, a.agent)),
          h("td", {}, stateBadge(a.status)),
          h("td", { class: "small" }, a.last_seen_at ? fmtTime(a.last_seen_at) : "never"),
          h("td", { class: "row-actions" },
            a.agent === state.me.agent
              ? h("span", { class: "muted small" }, "you")
              : [
                  actionForm({
                    label: a.status === "active" ? "Deactivate" : "Reactivate",
                    cls: "set-status inline",
                    danger: a.status === "active",
                    confirmText: a.status === "active" ? "Deactivate this agent? It loses every membership." : null,
                    build: () => ({ op: "admin.agent.set_status", args: { agent: a.agent, status: a.status === "active" ? "deactivated" : "active" } }),
                  }),
                  actionForm({
                    label: "Reset key",
                    cls: "reset-key inline",
                    confirmText: "Issue a new key? The old one stops working at once.",
                    build: () => ({ op: "admin.agent.reset_key", args: { agent: a.agent } }),
                    // Shown above the table: a row is rebuilt when its agent's data changes.
                    onDone: (r) => {
                      secrets.replaceChildren(h("div", {}, h("p", {}, "New key for ", agentLabel(r.agent)), secretBox("New key", r.key)));
                      secrets.scrollIntoView({ block: "nearest" });
                      return h("span", { class: "ok" }, "Reset.");
                    },
                  }),
                ],
          ),
        ),
      );
      const [hz, mt] = await Promise.all([
        fetch("/healthz").then((r) => r.text().then((t) => `${r.status} ${t.trim()}`)).catch((e) => `unreachable: ${e.message}`),
        fetch("/metrics").then((r) => r.text()).catch(() => ""),
      ]);
      const figures = parseMetrics(mt);
      update(health, [hz, figures], () => [
        h("p", {}, "Health: ", h("strong", {}, hz)),
        h("table", { class: "figures" }, h("tbody", {}, FIGURES.filter(([k]) => k in figures).map(([k, label]) => h("tr", {}, h("th", {}, label), h("td", {}, String(figures[k])))))),
        h("p", { class: "small" }, h("a", { href: "/metrics" }, "All metrics")),
      ]);
    };
  }

  // --- account
  async function pageAccount() {
    setMain(
      section("Your account",
        h("p", {}, agentLabel(state.me.agent), ` · ${state.me.status}`),
        h("p", { class: "small" }, "A new key replaces this one at once: this tab switches to it; every other session using the old key is closed."),
        actionForm({
          label: "Rotate my key",
          cls: "rotate-key",
          confirmText: "Issue a new key for yourself? The old one stops working at once.",
          build: () => ({ op: "agent.rotate_key", args: {} }),
          onDone: (r) => {
            sessionStorage.setItem(KEY_SLOT, r.key);
            state.conn.key = r.key;
            return secretBox("Your new key", r.key);
          },
        }),
      ),
    );
    return null;
  }

  // ---------------------------------------------------------------- router

  async function route() {
    if (!state.conn) return;
    const [, page, id] = (location.hash || "#/turn").split("/");
    for (const a of document.querySelectorAll("#nav a")) a.toggleAttribute("aria-current", a.dataset.page === page);
    clearInterval(state.timer);
    state.refresh = null;
    $("#notice").hidden = true;
    const pages = {
      turn: pageTurn,
      threads: id ? () => pageThread(id) : pageThreads,
      tasks: id ? () => pageTask(id) : pageTasks,
      memories: id ? () => pageMemory(id) : pageMemories,
      outcomes: pageOutcomes,
      admin: pageAdmin,
      account: pageAccount,
    };
    const make = pages[page] || pageTurn;
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
      $("#main").focus({ preventScroll: true });
    } catch (e) {
      if (token === route.token) setMain(rejectionView(e));
    }
  }

  window.addEventListener("hashchange", route);
  document.addEventListener("DOMContentLoaded", () => {
    $("#logout").addEventListener("click", () => logout());
    const key = sessionStorage.getItem(KEY_SLOT);
    if (key) login(key).catch((e) => pageLogin(`Could not log in again: ${e.reason || e.message}`));
    else pageLogin();
  });
})();
