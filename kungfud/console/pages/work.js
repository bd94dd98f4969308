// What an assignment and a Task's engagement share on every page that shows
// them: their summary, and the taker's deliver/drop and the judge's
// adopt/reject forms (one function for both kinds).

import { h, link, contentView, fmtTime, stateBadge, field, textArea, textInput, val, need } from "../dom.js";
import { agentLabel, actionForm } from "../session.js";

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

export { assignmentSummary, verdictForms, workActions, assignmentActions, engagementSummary, engagementActions };
