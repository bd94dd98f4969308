// The Account page's webhook (WIRE.md 1.2 "Webhooks"): where the daemon POSTs
// this agent's events when it holds no connection — shown (webhook.get), set or
// replaced (webhook.set; its signing secret is shown once) and cleared
// (webhook.clear). A daemon without webhooks answers webhook.get with an
// unknown-op bad_request: the section then says so and offers nothing.

import { h, fmtTime, field, textInput, val, need, section, stateBadge, secretBox, rejectionView, update } from "../dom.js";
import { state, actionForm } from "../session.js";
// The event kinds: served by the daemon from its one definition (kungfud/event_kinds.py).
import { EVENTS, DEFAULT_EVENTS } from "../events.js";

const unknownOp = (e) => e && e.code === "bad_request" && /unknown op/.test(e.reason || "");

function current(w) {
  if (!w || w.url === null || w.url === undefined) return h("p", { class: "muted" }, "No webhook: events reach this agent only while it is connected (subscribe).");
  const rows = [
    ["URL", h("code", {}, w.url)],
    ["Events", (w.events || []).join(", ")],
    ["State", stateBadge(w.state)],
    ["Delivered up to seq", String(w.delivered_seq ?? "—")],
    ["Pending", String(w.pending ?? 0)],
  ];
  if (w.last_attempt_at) rows.push(["Last attempt", fmtTime(w.last_attempt_at)]);
  if (w.last_error) rows.push(["Last error", w.last_error]);
  return h("table", { class: "figures webhook" }, h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v)))));
}

function webhookSection() {
  const now = h("div", { id: "webhook-now" }, h("p", { class: "muted" }, "Loading…"));
  const forms = h("div", { id: "webhook-forms" });
  const box = section("Webhook", now, forms);
  let built = false;
  const refresh = async () => {
    let w;
    try {
      w = await state.conn.read("webhook.get", {});
    } catch (e) {
      if (unknownOp(e)) {
        update(now, "none", () => h("p", { class: "muted webhook-unavailable" }, "This daemon does not offer webhooks (it does not know webhook.get). Events reach this agent while it is connected."));
        forms.replaceChildren();
        return;
      }
      update(now, e, () => rejectionView(e));
      return;
    }
    update(now, w, current);
    if (built) return;
    built = true;
    // Ticked: the events registered now (issue 37: not the default three when four are), else the default.
    const ticked = w && w.url && Array.isArray(w.events) ? w.events : DEFAULT_EVENTS;
    const boxes = EVENTS.map((ev) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "events", value: ev, checked: ticked.includes(ev) }), " ", ev));
    forms.replaceChildren(
      h("p", { class: "small muted" }, "The daemon POSTs each event to this URL, signed with a secret shown once (Standard Webhooks headers). Setting it again replaces the URL and the secret."),
      actionForm({
        label: "Set webhook",
        cls: "webhook-set",
        reset: false,
        fields: [
          field("URL (https://, or http:// to a host the operator allows)", textInput("url", { required: true, placeholder: "https://…" })),
          h("fieldset", {}, h("legend", {}, "Events"), boxes),
        ],
        build: (f) => {
          const events = [...f.querySelectorAll("input[name=events]:checked")].map((i) => i.value);
          return { op: "webhook.set", args: { url: need(val(f, "url"), "A URL"), events } };
        },
        onDone: (r) =>
          r.secret
            ? h("div", {}, secretBox("Signing secret", r.secret), h("p", { class: "small" }, `Deliveries start after seq ${r.since}.`))
            : h("span", { class: "ok" }, "Set (a replay: the secret was shown when it was first set)."),
      }),
      actionForm({
        label: "Clear webhook",
        cls: "webhook-clear",
        danger: true,
        confirmText: "Stop sending this agent's events to its webhook?",
        build: () => ({ op: "webhook.clear", args: {} }),
        onDone: () => h("span", { class: "ok" }, "Cleared."),
      }),
    );
  };
  return { box, refresh };
}

export { webhookSection };
