// The Search page (#/search/QUERY): what this agent may read that matches the
// words typed in the header's search box (WIRE.md 1.3 "Search"), best first.
// Snippets are participant text: set as text nodes only (h()).

import { h, link, fmtTime, section, rejectionView, setMain } from "../dom.js";
import { state } from "../session.js";

// Where an item is read in the console, and what it is called.
function where(it) {
  if (it.kind === "memory") return [`#/memories/${it.memory}`, `Memory ${it.memory} v${it.version}`];
  if (it.kind === "task") return [`#/tasks/${it.task}`, `Task ${it.task}`];
  if (it.assignment) return [`#/assignments/${it.assignment}`, `Delivery of ${it.assignment}`];
  if (it.kind === "entry") return [`#/threads/${it.thread}`, `Entry #${it.entry} in ${it.thread}`];
  return [`#/tasks/${it.task}`, `Delivery of ${it.engagement}`];
}

function row(it) {
  const [href, title] = where(it);
  return h("li", { "data-kind": it.kind },
    h("div", {}, h("span", { class: "badge" }, it.kind), " ", link(href, title)),
    h("div", { class: "snippet" }, it.snippet),
    h("div", { class: "small muted" }, `${fmtTime(it.at)} · score ${it.score}`));
}

async function pageSearch(q = "") {
  const box = document.querySelector("#search-q");
  if (box) box.value = q;
  const list = h("ul", { id: "search-results", class: "rows" });
  const more = h("button", { type: "button", hidden: true }, "More");
  const status = h("p", { class: "muted", "aria-live": "polite" });
  setMain(section(q ? `Search: ${q}` : "Search", status, list, more));
  if (!q) {
    status.textContent = 'Type words in the search box: all must match; "a phrase"; a prefix*.';
    return null;
  }
  let cursor = null;
  const next = async () => {
    try {
      const page = await state.conn.read("search", cursor ? { q, cursor } : { q });
      list.append(...page.items.map(row));
      cursor = page.cursor;
      more.hidden = !cursor;
      status.textContent = list.children.length ? "" : "Nothing you may read matches.";
    } catch (e) {
      more.hidden = true;
      status.replaceChildren(rejectionView(e));
    }
  };
  more.addEventListener("click", next);
  await next();
  return null;
}

export { pageSearch };
