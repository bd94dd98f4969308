// The Account page: rotate this agent's own key (the tab switches to it), its
// scoped keys (pages/keys.js), its webhook (pages/webhook.js) and its A2A card
// (pages/a2a.js).

import { h, section, secretBox, setMain } from "../dom.js";
import { KEY_SLOT, state, agentLabel, actionForm } from "../session.js";
import { webhookSection } from "./webhook.js";
import { keysSection } from "./keys.js";
import { a2aSection } from "./a2a.js";

// --- account
async function pageAccount() {
  const webhook = webhookSection();
  const keys = keysSection();
  const a2a = a2aSection();
  setMain(
    h("div", { class: "cols" },
      section("Your account",
        h("p", {}, agentLabel(state.me.agent), ` · ${state.me.status}`),
        h("p", { class: "small" }, "A new key replaces this one at once: this tab switches to it; every other session using the old key is closed."),
        actionForm({
          label: "Rotate my key",
          cls: "rotate-key",
          confirmText: "Issue a new key for yourself? The old one stops working at once.",
          build: () => ({ op: "agent.rotate_key", args: {} }),
          onDone: (r) => {
            sessionStorage.setItem(KEY_SLOT, r.key);
            state.conn.key = r.key;
            return secretBox("Your new key", r.key);
          },
        }),
      ),
      keys.box,
      webhook.box,
      a2a.box,
    ),
  );
  return () => Promise.all([keys.refresh(), webhook.refresh(), a2a.refresh()]);
}

export { pageAccount };
