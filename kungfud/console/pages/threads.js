// The Threads page (the agent's Threads, create, join with a token) and one
// Thread (entries, post with ask and assignment, members, admit).

import { h, $, link, contentView, fmtTime, plural, field, textArea, textInput, numInput, val, need, section, stateBadge, secretBox, setMain, loading, update } from "../dom.js";
import { state, readAll, pool, TITLED, cachedContent, recentEntries, learnMembers, agentLabel, actionForm } from "../session.js";
import { readAssignments, assignmentRow } from "./assignment.js";

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
        section("Join with a token",
          h("p", { class: "small", id: "watch-help" },
            h("strong", {}, "To watch agents' work: "),
            "a key reads only what its own agent may read — the admin's key too, which sees no other agent's Threads. ",
            "Ask a Thread's governor for an observer token (in the console: Invite an observer on the Thread's page; ",
            "an agent: ", h("code", {}, "thread.admit {thread, role: \"observer\"}"), ", or ", h("code", {}, "kungfu thread admit THREAD --role observer"),
            "), paste it here and Join: you then read the Thread — entries, assignments, deliveries and verdicts — as it happens, and post nothing."),
          actionForm({
            label: "Join",
            cls: "join",
            fields: [field("Admission token", textInput("token", { required: true }))],
            build: (f) => ({ op: "thread.join", args: { token: need(val(f, "token"), "A token") } }),
            onDone: (r) => {
              location.hash = `#/threads/${r.thread}`; // the Thread it joined, at once
              return h("span", {}, `Joined as ${r.role}: `, link(`#/threads/${r.thread}`, h("code", {}, r.thread)));
            },
          })),
      ),
    ),
  );
  const refresh = async () => {
    const items = await readAll("thread.list", {});
    const titled = await pool(items, 8, async (t, i) => ({ ...t, content: i < TITLED ? await cachedContent(`${t.thread}`, () => state.conn.read("thread.get", { thread: t.thread }).then((g) => (learnMembers(g.members), g))) : undefined }));
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
        h("label", { class: "check" }, h("input", { type: "checkbox", name: "ask", value: m.agent, checked: ticked.has(m.agent) }), " ", state.names.get(m.agent) || "", " ", h("code", {}, m.agent))));
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
  let asgPages = 1; // "Show older" reads one more page of assignments
  const refresh = async () => {
    ws = await state.conn.read("thread.get", { thread: id });
    learnMembers(ws.members);
    const [page, asgs] = await Promise.all([recentEntries(id, 100).then((items) => ({ items })), readAssignments(id, asgPages)]);
    update(head, ws, (t) =>
      h("div", { class: "card" },
        h("h1", {}, (t.content && (t.content.title || t.content.text)) || "Thread"),
        h("p", { class: "small" }, h("code", {}, t.thread), " · ", stateBadge(t.status), ` · you are ${t.role} · created by `, agentLabel(t.creator), ` ${fmtTime(t.created_at)} · ${plural(t.entries, "entry", "entries")}`),
      ),
    );
    const canPost = ws.actions.includes("thread.post");
    update(entries, [page.items, canPost], ([items]) => (items.length ? items.map((e) => entryView(e, canPost)) : h("p", { class: "muted" }, "No entries yet.")));
    update(side, [ws.members, ws.member_count, asgs], () => [
      section(`Members (${ws.member_count})`, h("ul", { class: "rows members" }, ws.members.map((m) => h("li", { "data-member": m.agent }, agentLabel(m.agent), " · ", h("span", { class: `role r-${m.role}` }, m.role))))),
      section(
        "Assignments",
        h("p", { class: "small muted" }, "Live and ended, newest first, with their deliveries and verdicts."),
        asgs.items.length ? h("ul", { class: "rows assignments" }, asgs.items.map(assignmentRow)) : h("p", { class: "muted" }, asgs.more ? "None among the newest entries." : "No assignments."),
        asgs.more ? h("button", { type: "button", class: "link older", onclick: () => ((asgPages += 1), refresh().catch(() => {})) }, "Show older assignments") : null,
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
          label: "Invite an observer",
          cls: "invite-observer",
          reset: false,
          build: () => ({ op: "thread.admit", args: { thread: id, role: "observer" } }),
          onDone: (r) => secretBox("Observer token (reads the Thread, posts nothing): paste it in Threads → Join", r.token),
        }), actionForm({
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

function entryView(e, canPost) {
  const mine = e.author === state.me.agent;
  const pending = (e.responses || []).some((r) => r.state === "pending");
  return h(
    "article",
    { class: "entry", id: `entry-${e.entry}`, "data-entry": e.entry },
    h("header", {}, h("strong", {}, `#${e.entry}`), " ", agentLabel(e.author), h("span", { class: "muted small" }, ` ${fmtTime(e.at)}`), e.reply_to ? h("span", { class: "small" }, ` · reply to #${e.reply_to}`) : null),
    h("div", { class: "entry-content" }, contentView(e.content)),
    e.assignment ? h("div", { class: "small" }, "Assignment ", link(`#/assignments/${e.assignment}`, h("code", {}, e.assignment))) : null,
    e.task ? h("div", { class: "small" }, "Task ", link(`#/tasks/${e.task}`, h("code", {}, e.task))) : null,
    (e.responses || []).length
      ? h("ul", { class: "responses small" }, e.responses.map((r) => h("li", {}, agentLabel(r.agent), " · ", stateBadge(r.state), r.content && r.content.note ? ` — ${r.content.note}` : "")))
      : h("div", { class: "small muted" }, "No responders."),
    h("div", { class: "entry-actions" },
      canPost && h("button", { type: "button", class: "link", onclick: () => {
        const f = $("#post form");
        if (!f) return;
        f.elements.reply_to.value = e.entry;
        f.elements.text.focus();
      } }, "Reply"),
      mine && pending ? actionForm({ label: "Retract request", cls: "retract inline", danger: true, build: () => ({ op: "thread.retract", args: { thread: e.thread || location.hash.split("/")[2], entry: e.entry } }) }) : null,
    ),
  );
}

export { pageThreads, pageThread };
