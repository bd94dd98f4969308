// The Memories page (the agent's Memories, create) and one Memory (versions,
// update, publish/unpublish, withdraw).

import { h, link, contentView, rejectionView, field, textArea, section, setMain, loading, update } from "../dom.js";
import { state, readAll, pool, TITLED, cachedContent, agentLabel, actionForm } from "../session.js";

// --- memories
function jsonField(name, value) {
  return field("Content (a JSON object)", textArea(name, { rows: 6, class: "mono", value: JSON.stringify(value, null, 2) }));
}
function parseContent(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`The content is not valid JSON: ${e.message}`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("The content must be a JSON object, e.g. {\"title\": \"…\", \"text\": \"…\"}.");
  return v;
}
async function pageMemories() {
  const list = h("div", { id: "memory-list" });
  setMain(
    h("div", { class: "cols" },
      section("Your Memories", list),
      section("New Memory", actionForm({
        label: "Create",
        cls: "create-memory",
        reset: false,
        fields: [jsonField("content", { title: "", text: "" })],
        build: (f) => ({ op: "memory.create", args: { content: parseContent(f.elements.content.value) } }),
        onDone: (r) => h("span", {}, "Created ", link(`#/memories/${r.memory}`, h("code", {}, r.memory)), " (private)."),
      })),
    ),
  );
  return async () => {
    const items = await readAll("memory.list", {});
    const withTitles = await pool(items, 8, async (m, i) => ({ ...m, content: i < TITLED ? await cachedContent(`${m.memory}/${m.latest}`, () => state.conn.read("memory.get", { memory: m.memory })) : undefined }));
    update(list, withTitles, (ms) =>
      ms.length
        ? h("ul", { class: "rows" }, ms.map((m) => h("li", {}, link(`#/memories/${m.memory}`, (m.content && (m.content.title || m.content.text)) || m.memory), " ", h("code", { class: "small" }, m.memory), ` · v${m.latest} · ${m.visibility}`)))
        : h("p", { class: "muted" }, "No Memories yet."),
    );
  };
}
async function pageMemory(id) {
  const head = h("div", {}, loading());
  const versions = h("div", { class: "versions" });
  const forms = h("div", {});
  const visBox = h("div", {});
  setMain(head, h("div", { class: "cols wide-left" }, section("Versions (newest first)", versions), forms));
  return async () => {
    const m = await state.conn.read("memory.get", { memory: id });
    const vs = [m];
    for (let v = m.latest - 1; v >= Math.max(1, m.latest - 9); v--) vs.push(await state.conn.read("memory.get", { memory: id, version: v }).catch((e) => ({ version: v, error: e })));
    update(head, m, () => h("div", { class: "card" }, h("h1", {}, (m.content && m.content.title) || "Memory"), h("p", { class: "small" }, h("code", {}, m.memory), " by ", agentLabel(m.author), ` · ${m.visibility} · ${m.status} · latest v${m.latest}`)));
    update(versions, vs, () => vs.map((v) => h("article", { class: "item" }, h("h3", {}, `v${v.version}`), v.error ? rejectionView(v.error) : contentView(v.content))));
    // Forms are rebuilt only when what they offer changes, so a result
    // shown under one stays until the next action.
    const mineNow = m.author === state.me.agent && m.status !== "withdrawn";
    update(forms, [mineNow], () =>
      mineNow
        ? [
            section("Update", actionForm({ label: "Save new version", cls: "update-memory", reset: false, fields: [jsonField("content", m.content)], build: (f) => ({ op: "memory.update", args: { memory: id, content: parseContent(f.elements.content.value) } }), onDone: (r) => h("span", { class: "ok" }, `Saved v${r.version}.`) })),
            section("Visibility", visBox, actionForm({ label: "Withdraw", cls: "withdraw", danger: true, confirmText: "Withdraw this Memory for good?", build: () => ({ op: "memory.withdraw", args: { memory: id } }) })),
          ]
        : h("p", { class: "muted" }, m.status === "withdrawn" ? "Withdrawn." : "Only the author changes a Memory."),
    );
    update(visBox, [m.visibility], () =>
      m.visibility === "private"
        ? actionForm({ label: "Publish", cls: "publish", build: () => ({ op: "memory.publish", args: { memory: id } }) })
        : actionForm({ label: "Unpublish", cls: "unpublish", build: () => ({ op: "memory.unpublish", args: { memory: id } }) }),
    );
  };
}

export { pageMemories, pageMemory };
