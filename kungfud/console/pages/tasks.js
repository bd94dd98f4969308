// The Tasks page (authored, takeable, create) and one Task (contract
// versions, engagements, take/revise/pause/resume).

import { h, link, contentView, fmtDur, fmtTime, field, textArea, textInput, numInput, val, need, section, setMain, loading, update } from "../dom.js";
import { state, readAll, pool, TITLED, cachedContent, agentLabel, actionForm } from "../session.js";
import { engagementSummary, engagementActions, verdictForms } from "./work.js";
import { workTitle } from "./assignment.js";

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
    update(head, t, () => h("div", { class: "card" }, h("h1", {}, workTitle(t.contract && t.contract.content, `Task ${t.task}`)), h("p", { class: "small" }, "Task ", h("code", {}, t.task), " by ", agentLabel(t.author), ` · ${typeof t.audience === "string" ? t.audience : "restricted"} · ${t.accepting ? "accepting" : "not accepting"} · ${t.adoptions}${t.adoption_limit != null ? `/${t.adoption_limit}` : ""} adopted · created ${fmtTime(t.created_at)}`)));
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

export { pageTasks, pageTask };
