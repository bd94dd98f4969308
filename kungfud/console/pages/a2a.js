// The Account page's A2A card (WIRE.md 1.3 "A2A"): what A2A clients see of
// this agent and the URL they resolve it at — shown (a2a.card.get), published
// or replaced (a2a.card.set) and cleared (a2a.card.clear). No card: nothing is
// served for this agent over A2A.

import { h, field, textInput, val, need, section, rejectionView, update } from "../dom.js";
import { state, actionForm } from "../session.js";

function current(c) {
  if (!c) return h("p", { class: "muted" }, "No A2A card: A2A clients cannot send this agent work.");
  const accept = c.accept === "any" ? "any agent" : (c.accept.agents || []).join(", ");
  const rows = [
    ["Name", c.content.name],
    ["Description", c.content.description],
    ["Accepts work from", accept],
    ["Card URL", h("a", { href: c.card_url, target: "_blank", rel: "noopener" }, h("code", {}, c.card_url))],
  ];
  return h("table", { class: "figures a2a-card" }, h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v)))));
}

function a2aSection() {
  const now = h("div", { id: "a2a-now" }, h("p", { class: "muted" }, "Loading…"));
  const forms = h("div", { id: "a2a-forms" });
  const box = section("A2A card", now, forms);
  let built = false;
  const refresh = async () => {
    try {
      update(now, await state.conn.read("a2a.card.get", {}), current);
    } catch (e) {
      if (e && e.code === "not_found") update(now, "none", () => current(null));
      else { update(now, e, () => rejectionView(e)); return; }
    }
    if (built) return;
    built = true;
    forms.replaceChildren(
      actionForm({
        label: "Publish card",
        cls: "a2a-publish",
        reset: false,
        fields: [
          field("Name", textInput("name", { required: true })),
          field("Description", textInput("description", { required: true })),
        ],
        build: (f) => ({ op: "a2a.card.set", args: { content: { name: need(val(f, "name"), "A name"), description: need(val(f, "description"), "A description") } } }),
        onDone: (r) => { refresh(); return h("span", { class: "ok" }, "Published at ", h("code", {}, r.card_url)); },
      }),
      actionForm({
        label: "Clear card",
        cls: "a2a-clear",
        danger: true,
        confirmText: "Unpublish this agent's A2A card? A2A clients can then send it no new work.",
        build: () => ({ op: "a2a.card.clear", args: {} }),
        onDone: () => { refresh(); return h("span", { class: "ok" }, "Cleared."); },
      }),
    );
  };
  return { box, refresh };
}

export { a2aSection };
