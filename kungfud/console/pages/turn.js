// The Turn page: what this agent owes (oldest first) and the work offered to
// it, kept in place card by card as events and re-reads arrive.

import { h, link, contentView, fmtDur, fmtTime, due, tick, field, textArea, textInput, val, need, refLink, section, setMain, loading, rejectionView } from "../dom.js";
import { state, readAll, readEntry, threadTitle, agentLabel, actionForm } from "../session.js";
import { assignmentSummary, assignmentActions, engagementSummary, engagementActions } from "./work.js";

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
      const [e, title] = await Promise.all([readEntry(ref.thread, ref.entry), threadTitle(ref.thread)]);
      body.replaceChildren(e ? h("div", {}, h("div", { class: "small" }, "From ", agentLabel(e.author), ` in `, link(`#/threads/${ref.thread}`, title || h("code", {}, ref.thread)), ` (entry #${e.entry})`), contentView(e.content)) : h("p", {}, "The entry is gone."));
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
      await threadTitle(a.thread); // its members' names
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

function oppCard(o) {
  const body = h("div", { class: "context" }, loading());
  const from = h("span", {}, agentLabel(o.creator || o.author));
  const card = h("article", { class: "item opp", "data-opportunity": o.ref.assignment || o.ref.task }, h("header", {}, h("strong", {}, o.opportunity === "task" ? "Task" : "Assignment"), " · ", refLink(o.ref), " · from ", from), body);
  const fill = async () => {
    if (o.opportunity === "assignment") {
      const a = await state.conn.read("assignment.get", { assignment: o.ref.assignment });
      await threadTitle(a.thread); // its members' names
      from.replaceChildren(agentLabel(o.creator || o.author));
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

export { pageTurn };
