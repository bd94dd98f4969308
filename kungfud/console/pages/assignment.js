// One assignment, live or ended (#/assignments/ID): what was asked, the
// delivery, the verdict and its reason, and the action this agent may take.
// Also the Thread page's assignment rows (read with thread.assignments).

import { h, link, contentView, fmtTime, stateBadge, section, setMain, loading, update } from "../dom.js";
import { state, threadTitle, agentLabel, actionForm } from "../session.js";
import { assignmentSummary, assignmentActions } from "./work.js";

const ENDED = new Set(["adopted", "rejected", "undecided", "dropped", "timed_out", "voided"]);

// What the work is, in a few words: the output asked for, else the criteria.
function workTitle(content, fallback) {
  const c = content && typeof content === "object" ? content : {};
  const text = c.output || c.title || c.criteria || c.text;
  return typeof text === "string" && text ? (text.length > 120 ? `${text.slice(0, 117)}…` : text) : fallback;
}

// How it ended, in one line under the title: the verdict and its reason, or
// what ended it.
function endedLine(a) {
  if (!ENDED.has(a.state)) return null;
  const reason = a.judgment && a.judgment.content && a.judgment.content.reason;
  const by = a.judgment ? a.creator : a.ended_by === "deadline" ? null : a.state === "dropped" ? a.taker : a.state === "voided" ? a.creator : null;
  return h("div", { class: "ended small" },
    "Ended ", stateBadge(a.state), a.ended_at ? ` ${fmtTime(a.ended_at)}` : "",
    by ? h("span", {}, " by ", agentLabel(by)) : a.ended_by === "deadline" || a.state === "timed_out" ? " by its deadline" : "",
    typeof reason === "string" ? h("div", { class: "reason" }, "Reason: ", reason) : null,
  );
}

async function pageAssignment(id) {
  const head = h("div", { id: "assignment-head" }, loading());
  const body = h("div", { id: "assignment" });
  const actions = h("div", { id: "assignment-actions" });
  const grid = h("div", {}, section("The work", body), actions);
  setMain(head, grid);
  return async () => {
    const a = await state.conn.read("assignment.get", { assignment: id });
    const title = await threadTitle(a.thread); // also learns the members' names
    update(head, [a.state, a.content, title, a.ended_at], () =>
      h("div", { class: "card" },
        h("h1", {}, workTitle(a.content, "Assignment")),
        h("p", { class: "small" }, "Assignment ", h("code", {}, a.assignment), " · ", stateBadge(a.state), " · in ",
          link(`#/threads/${a.thread}`, title || h("code", {}, a.thread)), ` (entry #${a.entry}) · created ${fmtTime(a.created_at)}`),
        endedLine(a),
      ),
    );
    update(body, a, () => assignmentSummary(a));
    const mine = a.obligations.map((o) => o.obligation);
    update(actions, [a.state, a.to, mine], () => {
      const parts = [];
      if (a.state === "open" && a.to === state.me.agent)
        parts.push(section("Take", actionForm({ label: "Take", cls: "take", build: () => ({ op: "assignment.take", args: { assignment: a.assignment } }) })));
      for (const ob of mine) parts.push(section(ob === "deliver" ? "Deliver" : "Judge", ...assignmentActions(a, ob)));
      grid.className = parts.length ? "cols wide-left" : ""; // the work takes the width when nothing is to be done
      return parts;
    });
  };
}

// The Thread page's assignments, live and ended, newest first
// (thread.assignments): `pages` pages of PAGE, the next cursor kept for "Show older".
const PAGE = 20;
async function readAssignments(thread, pages) {
  const items = [];
  let cursor = null;
  for (let i = 0; i < pages; i++) {
    const page = await state.conn.read("thread.assignments", { thread, limit: PAGE, ...(cursor ? { cursor } : {}) });
    items.push(...page.items);
    cursor = page.cursor;
    if (cursor === null) break;
  }
  return { items, more: cursor !== null };
}

function assignmentRow(a) {
  const mine = a.state === "open" && a.to === state.me.agent;
  const reason = a.judgment && a.judgment.content;
  return h("li", { "data-assignment": a.assignment, "data-state": a.state },
    h("div", {}, link(`#/assignments/${a.assignment}`, workTitle(a.content, a.assignment)), " ", stateBadge(a.state)),
    h("div", { class: "small" }, h("code", {}, a.assignment), ` (entry #${a.entry}) to `, agentLabel(a.to)),
    a.delivery ? h("div", { class: "delivery" }, h("h4", {}, `Delivery (${fmtTime(a.delivery.at)})`), contentView(a.delivery.content)) : null,
    a.judgment
      ? h("div", { class: "judgment" }, h("h4", {}, a.judgment.verdict === "adopt" ? "Adopted" : "Rejected", ` by the creator (${fmtTime(a.judgment.at)})`),
          reason && typeof reason.reason === "string" && Object.keys(reason).length === 1 ? h("div", { class: "reason" }, "Reason: ", reason.reason) : reason ? contentView(reason) : null)
      : ENDED.has(a.state) ? endedLine(a) : null,
    mine ? actionForm({ label: "Take", cls: "take", build: () => ({ op: "assignment.take", args: { assignment: a.assignment } }) }) : null,
  );
}

export { ENDED, workTitle, pageAssignment, readAssignments, assignmentRow };
