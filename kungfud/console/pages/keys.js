// The Account page's scoped keys (WIRE.md 1.3 "Scoped keys"): keys that can do
// less than this agent's own — read, worker or a2a — for a dashboard, a worker
// on a shared box or an A2A caller. Listed (agent.key.list: never a key),
// created (the key is shown once) and revoked (its connections close).

import { h, fmtTime, field, textInput, numInput, val, need, section, secretBox, rejectionView, update } from "../dom.js";
import { state, actionForm } from "../session.js";

const SCOPES = { read: "read: every read", worker: "worker: reads, posting and doing offered work", a2a: "a2a: the A2A ops only" };

function listed(items, refresh) {
  if (!items.length) return h("p", { class: "muted" }, "No scoped keys: only this agent's own key works for it.");
  return h("table", { class: "keys" },
    h("thead", {}, h("tr", {}, ["Label", "Scope", "Id", "Created", "Expires", "Last used", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, items.map((k) => h("tr", { "data-key": k.key_id },
      h("td", {}, k.label), h("td", {}, k.scope), h("td", {}, h("code", {}, k.key_id)),
      h("td", {}, fmtTime(k.created_at)), h("td", {}, k.expires_at ? fmtTime(k.expires_at) : "never"),
      h("td", {}, k.last_used_at ? fmtTime(k.last_used_at) : "—"),
      h("td", {}, actionForm({
        label: "Revoke",
        cls: "key-revoke",
        danger: true,
        confirmText: `Revoke the key "${k.label}"? Whatever uses it is disconnected at once.`,
        build: () => ({ op: "agent.key.revoke", args: { key_id: k.key_id } }),
        onDone: () => (refresh(), h("span", { class: "ok" }, "Revoked.")),
      })),
    ))),
  );
}

function keysSection() {
  const now = h("div", { id: "keys-now" }, h("p", { class: "muted" }, "Loading…"));
  const refresh = async () => {
    try {
      const got = await state.conn.read("agent.key.list", {});
      update(now, got.items, (items) => listed(items, refresh));
    } catch (e) {
      update(now, e, () => rejectionView(e));
    }
  };
  const scope = h("select", { name: "scope" }, Object.entries(SCOPES).map(([v, t]) => h("option", { value: v }, t)));
  const box = section("Scoped keys", now,
    actionForm({
      label: "Create key",
      cls: "key-create",
      fields: [
        field("Scope", scope),
        field("Label (who or what holds it)", textInput("label", { required: true, maxlength: 200 })),
        field("Expires in (hours; empty: never)", numInput("hours")),
      ],
      build: (f) => {
        const args = { scope: val(f, "scope"), label: need(val(f, "label"), "A label") };
        if (val(f, "hours")) args.expires_in_s = Math.round(Number(val(f, "hours")) * 3600);
        return { op: "agent.key.create", args };
      },
      onDone: (r) => {
        refresh();
        return r.key
          ? secretBox(`Key ${r.key_id} (${r.scope}); shown only now`, r.key)
          : h("span", { class: "ok" }, "Created (a replay: the key was shown the first time).");
      },
    }),
  );
  return { box, refresh };
}

export { keysSection };
