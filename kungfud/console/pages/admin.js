// The Admin page (admins only): agents (create, deactivate/reactivate, reset
// key) and the daemon's health and headline metrics.

import { h, fmtTime, field, textInput, val, need, section, stateBadge, secretBox, setMain, keyed, update } from "../dom.js";
import { state, readAll, learnName, agentLabel, actionForm, scheduleRefresh } from "../session.js";

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
    for (const a of list) learnName(a.agent, a.content);
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

export { pageAdmin };
