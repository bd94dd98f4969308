// The Outcomes page: how the agent's work ended, newest first — each row with
// what the work was (the assignment's or the contract's words, and its Thread
// or Task) and who ended it, by name where this tab knows it.

import { h, link, fmtTime, refLink, section, stateBadge, rejectionView, setMain, update } from "../dom.js";
import { state, readAll, pool, TITLED, cachedContent, threadTitle, agentLabel } from "../session.js";
import { workTitle } from "./assignment.js";

// What the work was: an ended assignment or engagement never changes, so its
// words are read once per tab.
async function describe(o) {
  const r = o.ref || {};
  if (r.assignment) {
    const what = await cachedContent(`work:${r.assignment}`, () => state.conn.read("assignment.get", { assignment: r.assignment }));
    const where = await threadTitle(r.thread); // learns its members' names too
    return { what: workTitle(what, null), where: where || r.thread, whereLink: `#/threads/${r.thread}` };
  }
  if (r.engagement) {
    const what = await cachedContent(`work:${r.engagement}`, () => state.conn.read("engagement.get", { engagement: r.engagement }), (e) => e.contract && e.contract.content);
    return { what: workTitle(what, null), where: `Task ${r.task}`, whereLink: `#/tasks/${r.task}` };
  }
  return {};
}

async function pageOutcomes() {
  const list = h("div", { id: "outcome-list" });
  setMain(section("How your work ended (newest first)", list));
  return async () => {
    let items;
    try {
      items = await readAll("outcomes", {}, 3);
    } catch (e) {
      list.replaceChildren(rejectionView(e));
      list.dataset.sig = "";
      return;
    }
    const rows = await pool(items, 8, async (o, i) => ({ ...o, about: i < TITLED ? await describe(o).catch(() => ({})) : {} }));
    update(list, rows, (os) =>
      os.length
        ? h("ul", { class: "rows outcomes" }, os.map((o) => h("li", { "data-state": o.state, "data-ref": o.ref.assignment || o.ref.engagement },
            h("div", {}, stateBadge(o.state), " ", o.about.what ? h("strong", { class: "what" }, o.about.what) : null, o.about.what ? " " : "", refLink(o.ref)),
            h("div", { class: "small" },
              o.ref.assignment ? "Assignment in " : "Engagement on ",
              o.about.where ? link(o.about.whereLink, o.about.where) : h("code", {}, o.ref.thread || o.ref.task),
              ` · ${fmtTime(o.at)}`,
              o.by ? h("span", {}, " · by ", agentLabel(o.by)) : " · by its deadline"),
            o.content && o.content.reason ? h("div", { class: "reason" }, "Reason: ", o.content.reason) : null)))
        : h("p", { class: "muted" }, "Nothing has ended yet."),
    );
  };
}

export { pageOutcomes };
