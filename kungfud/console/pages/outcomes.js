// The Outcomes page: how the agent's work ended, newest first.

import { h, fmtTime, refLink, section, stateBadge, rejectionView, setMain, update } from "../dom.js";
import { readAll, agentLabel } from "../session.js";

// --- outcomes
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
    update(list, items, (os) =>
      os.length
        ? h("ul", { class: "rows outcomes" }, os.map((o) => h("li", { "data-state": o.state }, stateBadge(o.state), " ", refLink(o.ref), ` · ${fmtTime(o.at)}`, o.by ? h("span", {}, " · by ", agentLabel(o.by)) : " · by deadline", o.content && o.content.reason ? h("div", { class: "reason" }, "Reason: ", o.content.reason) : null)))
        : h("p", { class: "muted" }, "Nothing has ended yet."),
    );
  };
}

export { pageOutcomes };
