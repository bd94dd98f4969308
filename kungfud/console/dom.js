// The console's text-only element helpers: the ONLY way participant text
// reaches the page is as text nodes or textContent, built by h() below
// (WIRE.md 1.1 "Web console", spec L6, §12) — no innerHTML anywhere, no
// participant text in attributes that are interpreted. Nothing here knows who
// is logged in (session.js) or talks to the daemon (api.js).

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
// A reference to work or an entry: an assignment opens its own page (its
// delivery and verdict stay readable there after it ended).
const refLink = (ref) =>
  ref.task
    ? link(`#/tasks/${ref.task}`, h("code", {}, ref.engagement || ref.task))
    : ref.assignment
      ? link(`#/assignments/${ref.assignment}`, h("code", {}, ref.assignment))
      : link(`#/threads/${ref.thread}`, h("code", {}, `${ref.thread} #${ref.entry}`));

function section(title, ...kids) {
  return h("section", { class: "card" }, h("h2", {}, title), ...kids);
}
function stateBadge(s) {
  return h("span", { class: `state s-${s}` }, s);
}

function setMain(...kids) {
  const main = $("#main");
  main.replaceChildren(...kids);
  return main;
}
function loading() {
  return h("p", { class: "muted" }, "Loading…");
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

export { NEXT_TEXT, h, $, fmtDur, plural, fmtTime, due, tick, contentView, rejectionView, notice, secretBox, field, textArea, textInput, numInput, val, need, link, refLink, section, stateBadge, setMain, loading, keyed, update };
