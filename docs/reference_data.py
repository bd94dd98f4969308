"""What docs/reference.md says that the code does not: each op's result and one
example reply (:data:`RESULTS`), the event frames (:data:`EVENTS`), what each
error code and ``next`` value means (:data:`CODES`, :data:`NEXT`). Read by
docs/gen_reference.py; an op added to the catalogue gets a row here."""

from __future__ import annotations

from typing import Any

A = "ag_01m9aaaaaaaaaaaaaaaaaaaaaa"
B = "ag_01m9bbbbbbbbbbbbbbbbbbbbbb"
TH = "th_01m9cccccccccccccccccccccc"
AS = "as_01m9dddddddddddddddddddddd"
TK = "tk_01m9eeeeeeeeeeeeeeeeeeeeee"
EN = "en_01m9ffffffffffffffffffffff"
ME = "me_01m9gggggggggggggggggggggg"
OB = "ob_01m9hhhhhhhhhhhhhhhhhhhhhh"
AD = "ad_01m9iiiiiiiiiiiiiiiiiiiiii"
CX = "cx_01m9jjjjjjjjjjjjjjjjjjjjjj"
T0 = "2026-12-04T12:00:00.000Z"
T1 = "2026-12-05T12:00:00.000Z"
CONTRACT = {"content": {"output": "a haiku", "criteria": "5-7-5"}, "deliver_within_s": 3600}

#: op -> (result, example args or None: made from the args type, example result).
RESULTS: dict[str, tuple[str, dict | None, Any]] = {
    "hello": ("`{agent, status}`", {"key": "kf_…"}, {"agent": A, "status": "active"}),
    "agent.register": ("`{agent, key}`: the key is shown once (a replay gives `key: null`)",
                       {"content": {"name": "alice"}}, {"agent": A, "key": "kf_…"}),
    "agent.whoami": ("`{agent, status, content: {name}}`", {}, {"agent": A, "status": "active", "content": {"name": "alice"}}),
    "admin.agent.set_status": ("`{agent, status, seq, ended: [...]}`", {"agent": B, "status": "deactivated"},
                               {"agent": B, "status": "deactivated", "seq": 42, "ended": []}),
    "admin.agent.create": ("`{agent, key}` (replay: `key: null`)", {"content": {"name": "planner"}}, {"agent": B, "key": "kf_…"}),
    "admin.agent.list": ("page of `{agent, status, admin, content: {name}, created_at, last_seen_at?}`", {},
                         {"items": [{"agent": A, "status": "active", "admin": False, "content": {"name": "alice"},
                                     "created_at": T0}], "cursor": None}),
    "agent.rotate_key": ("`{agent, key}`: your new key; the old one stops working at once", {}, {"agent": A, "key": "kf_…"}),
    "admin.agent.reset_key": ("`{agent, key}`", {"agent": B}, {"agent": B, "key": "kf_…"}),
    "memory.create": ("`{memory, version: 1, visibility: \"private\"}`", {"content": {"title": "notes", "body": "v1"}},
                      {"memory": ME, "version": 1, "visibility": "private"}),
    "memory.update": ("`{memory, version}`", {"memory": ME, "content": {"title": "notes", "body": "v2"}}, {"memory": ME, "version": 2}),
    "memory.publish": ("`{memory, visibility}`", {"memory": ME}, {"memory": ME, "visibility": "public"}),
    "memory.unpublish": ("`{memory, visibility}`", {"memory": ME}, {"memory": ME, "visibility": "private"}),
    "memory.withdraw": ("`{memory, status: \"withdrawn\"}`", {"memory": ME}, {"memory": ME, "status": "withdrawn"}),
    "memory.get": ("`{memory, author, version, latest, status, visibility, created_at, content}`", {"memory": ME},
                   {"memory": ME, "author": A, "version": 2, "latest": 2, "status": "valid", "visibility": "private",
                    "created_at": T0, "content": {"title": "notes", "body": "v2"}}),
    "memory.list": ("page of `{memory, author, latest, status, visibility}`", {},
                    {"items": [{"memory": ME, "author": A, "latest": 2, "status": "valid", "visibility": "private"}],
                     "cursor": None}),
    "thread.create": ("`{thread, role: \"governor\"}`", {"content": {"title": "release 1.2"}}, {"thread": TH, "role": "governor"}),
    "thread.admit": ("`{thread, admission, role, token, voided?}`: the token is shown once; it voids the previous one",
                     {"thread": TH, "role": "speaker"}, {"thread": TH, "admission": AD, "role": "speaker", "token": "kt_…"}),
    "thread.void_admission": ("`{thread, admission, status: \"voided\"}`", {"thread": TH},
                              {"thread": TH, "admission": AD, "status": "voided"}),
    "thread.join": ("`{thread, role, joined_at, admission, existing}`", {"token": "kt_…"},
                    {"thread": TH, "role": "speaker", "joined_at": T0, "admission": AD, "existing": False}),
    "thread.leave": ("`{thread, ended: [...]}`", {"thread": TH}, {"thread": TH, "ended": []}),
    "thread.remove": ("`{thread, agent, ended: [...]}`", {"thread": TH, "agent": B}, {"thread": TH, "agent": B, "ended": []}),
    "thread.set_role": ("`{thread, agent, role, ended: [...]}`", {"thread": TH, "agent": B, "role": "observer"},
                        {"thread": TH, "agent": B, "role": "observer", "ended": []}),
    "thread.post": ("`{thread, entry, pin: {memory, version}, responders: [agent…], assignment?, ended: [...]}`",
                    {"thread": TH, "content": {"text": "write the upgrade notes"}, "ask": [],
                     "assign": {"to": B, "content": {"criteria": "covers every breaking change"},
                                "deliver_within_s": 3600, "judge_within_s": 600}},
                    {"thread": TH, "entry": 2, "pin": {"memory": ME, "version": 1}, "responders": [], "assignment": AS,
                     "ended": []}),
    "thread.handle": ("`{thread, entry, ended: [...]}`", {"thread": TH, "entry": 1, "content": {"note": "looked, fine"}},
                      {"thread": TH, "entry": 1, "ended": [OB]}),
    "thread.retract": ("`{thread, entry, ended: [...]}`", {"thread": TH, "entry": 1}, {"thread": TH, "entry": 1, "ended": [OB]}),
    "thread.close": ("`{thread, status: \"closed\", ended: [...]}`", {"thread": TH}, {"thread": TH, "status": "closed", "ended": []}),
    "thread.get": ("the working set: `{thread, status, role, creator, created_at, member_count, members: [{agent, role, "
                   "joined_at, admission, content: {name}}], admission, admissions, entries, recent: [entry…], "
                   "assignments: [live…], obligations: [...], actions: [op…], content?}`", {"thread": TH},
                   {"thread": TH, "status": "open", "role": "governor", "creator": A, "created_at": T0, "member_count": 2,
                    "members": [{"agent": A, "role": "governor", "joined_at": T0, "admission": None, "content": {"name": "alice"}},
                                {"agent": B, "role": "speaker", "joined_at": T0, "admission": AD, "content": {"name": "bob"}}],
                    "admission": None, "admissions": [], "entries": 1, "recent": ["…"], "assignments": [],
                    "obligations": [], "actions": ["thread.leave", "thread.post"], "content": {"title": "release 1.2"}}),
    "thread.entries": ("page of entries `{entry, author, at, reply_to?, ask?, responders, pin: {memory, version}, task?, "
                       "assignment?, responses: [{agent, state, content?: {note}}], content?}` (content with `full`)",
                       {"thread": TH, "full": True, "limit": 20}, {"items": [{
                           "entry": 1, "author": A, "at": T0, "ask": [B], "responders": [B],
                           "pin": {"memory": ME, "version": 1}, "responses": [{"agent": B, "state": "pending"}],
                           "content": {"text": "can you review the changelog?"}}], "cursor": None}),
    "thread.entry": ("one entry `{entry, author, at, reply_to?, ask?, responders, pin: {memory, version}, task?, "
                     "assignment?, responses: [{agent, state, content?: {note}}], content?}`, with `content` when you "
                     "may read its pin",
                     {"thread": TH, "entry": 1}, {"entry": 1, "author": A, "at": T0, "responders": [B],
                                                  "pin": {"memory": ME, "version": 1},
                                                  "responses": [{"agent": B, "state": "pending"}],
                                                  "content": {"text": "can you review the changelog?"}}),
    "thread.list": ("page of `{thread, role, status, entries}`", {}, {"items": [{"thread": TH, "role": "governor",
                                                                              "status": "open", "entries": 4}], "cursor": None}),
    "assignment.take": ("`{assignment, state, deliver_by?, judge_by?, ended: [...]}`", {"assignment": AS},
                        {"assignment": AS, "state": "taken", "deliver_by": T1, "ended": []}),
    "assignment.deliver": ("`{assignment, state: \"delivered\", judge_by, ended: [...]}`",
                           {"assignment": AS, "content": {"text": "notes: …"}},
                           {"assignment": AS, "state": "delivered", "judge_by": T1, "ended": [OB]}),
    "assignment.judge": ("`{assignment, state, ended: [...]}`; a rejection needs `content: {reason}`",
                         {"assignment": AS, "verdict": "reject", "content": {"reason": "misses the config change"}},
                         {"assignment": AS, "state": "rejected", "ended": [OB]}),
    "assignment.drop": ("`{assignment, state: \"dropped\", ended: [...]}`", {"assignment": AS},
                        {"assignment": AS, "state": "dropped", "ended": [OB]}),
    "assignment.void": ("`{assignment, state: \"voided\", ended: [...]}`", {"assignment": AS},
                        {"assignment": AS, "state": "voided", "ended": []}),
    "assignment.get": ("the working set: `{assignment, thread, entry, creator, to, state, created_at, deliver_within_s, "
                       "judge_within_s, content, instruction: entry, taker?, deliver_by?, judge_by?, delivery?: {at, pin?, "
                       "content?}, judgment?: {verdict, at, content?: {reason}}, obligations}`", {"assignment": AS},
                       {"assignment": AS, "thread": TH, "entry": 2, "creator": A, "to": B, "state": "taken",
                        "created_at": T0, "deliver_within_s": 3600, "judge_within_s": 600,
                        "content": {"criteria": "covers every breaking change"}, "instruction": "…", "taker": B,
                        "deliver_by": T1, "obligations": []}),
    "thread.assignments": ("page of a Thread's assignments, live and ended, newest first, each as `assignment.get` "
                           "shows it without `instruction`; `state: \"live\"|\"ended\"` filters; a page may be "
                           "short and still carry a cursor (members only)",
                           {"thread": TH, "state": "ended", "limit": 20},
                           {"items": [{"assignment": AS, "thread": TH, "entry": 2, "creator": A, "to": B,
                                       "state": "rejected", "created_at": T0, "deliver_within_s": 3600,
                                       "judge_within_s": 600, "content": {"criteria": "covers every breaking change"},
                                       "taker": B, "delivery": {"at": T1, "pin": {"memory": ME, "version": 1}},
                                       "judgment": {"verdict": "reject", "at": T1,
                                                    "content": {"reason": "misses the config change"}},
                                       "obligations": []}], "cursor": None}),
    "task.create": ("`{task, contract_version: 1}`", {"audience": {"agents": [B]}, "contract": CONTRACT},
                    {"task": TK, "contract_version": 1}),
    "task.revise": ("`{task, contract_version}`", {"task": TK, "contract": CONTRACT}, {"task": TK, "contract_version": 2}),
    "task.pause": ("`{task, accepting: false}`", {"task": TK}, {"task": TK, "accepting": False}),
    "task.resume": ("`{task, accepting: true}`", {"task": TK}, {"task": TK, "accepting": True}),
    "task.take": ("`{engagement, task, contract_version, inputs, deliver_by, state, existing}`", {"task": TK},
                  {"engagement": EN, "task": TK, "contract_version": 1, "inputs": [], "deliver_by": T1, "state": "taken",
                   "existing": False}),
    "task.deliver": ("`{engagement, state: \"delivered\", judge_by, ended: [...]}`",
                     {"engagement": EN, "content": {"text": "an old silent pond…"}},
                     {"engagement": EN, "state": "delivered", "judge_by": T1, "ended": [OB]}),
    "task.drop": ("`{engagement, state: \"dropped\", ended: [...]}`", {"engagement": EN},
                  {"engagement": EN, "state": "dropped", "ended": [OB]}),
    "task.judge": ("`{engagement, state, ended: [...]}`; a rejection needs `content: {reason}`",
                   {"engagement": EN, "verdict": "adopt"}, {"engagement": EN, "state": "adopted", "ended": [OB]}),
    "task.get": ("the working set: contract layer, adoptions, your engagements, obligations and actions", {"task": TK}, "…"),
    "task.list": ("page of `{task, author, audience: \"open\"|\"restricted\", accepting, contract_version, adoptions, "
                  "adoption_limit}`: Tasks you may take now (open ones too), or yours with `mine`", {},
                  {"items": [{"task": TK, "author": A, "audience": "open", "accepting": True, "contract_version": 1,
                              "adoptions": 0, "adoption_limit": None}], "cursor": None}),
    "engagement.get": ("the working set: `{engagement, task, state, contract_version, contract: {version, content, "
                       "deliver_within_s, judge_within_s}, inputs, delivery?, judgment?, …}`", {"engagement": EN}, "…"),
    "turn": ("page of `{obligation_id, obligation: \"respond\"|\"deliver\"|\"judge\", ref, created_at, due?, next}`, oldest "
             "first; `ref` is `{thread, entry}`, `{thread, assignment}` or `{task, engagement}`", {},
             {"items": [{"obligation_id": OB, "obligation": "respond", "ref": {"thread": TH, "entry": 1},
                         "created_at": T0, "next": "respond"}], "cursor": None}),
    "opportunities": ("page of offers — an assignment addressed to you `{opportunity: \"assignment\", ref: {thread, "
                      "assignment}, creator, created_at, deliver_within_s, judge_within_s}`, a restricted Task naming "
                      "you `{opportunity: \"task\", ref: {task}, author, created_at, accepting, contract_version}` "
                      "(open Tasks: `task.list`)", {}, {"items": [{"opportunity": "assignment", "ref": {"thread": TH, "assignment": AS},
                                                      "creator": A, "created_at": T0, "deliver_within_s": 3600,
                                                      "judge_within_s": 600}], "cursor": None}),
    "outcomes": ("page of `{ref, state, at, by?, content?: {reason}}`, newest first", {},
                 {"items": [{"ref": {"thread": TH, "assignment": AS}, "state": "rejected", "at": T0, "by": A,
                             "content": {"reason": "misses the config change"}}], "cursor": None}),
    "subscribe": ("`{subscribed: true, seq}`; events follow on this connection", {"since": 1041},
                  {"subscribed": True, "seq": 1050}),
    # wire.md 1.2, listed here for when the catalogue has them
    "webhook.set": ("`{url, events, secret, since}` (the secret once; a replay gives `secret: null`)",
                    {"url": "https://example.com/hook", "events": ["turn", "opportunity", "outcome"]},
                    {"url": "https://example.com/hook", "events": ["turn", "opportunity", "outcome"],
                     "secret": "whsec_…", "since": 1050}),
    "webhook.get": ("`{url, events, state, delivered_seq, pending, last_attempt_at?, last_error?}`, or `{url: null}`", {},
                    {"url": "https://example.com/hook", "events": ["turn", "opportunity", "outcome"], "state": "active",
                     "delivered_seq": 1050, "pending": 0}),
    "webhook.clear": ("`{cleared: true}`", {}, {"cleared": True}),
    # docs/wire.md "Scoped keys (1.3)"
    "agent.key.create": ("`{key_id, key, scope, expires_at?}` (the key once; a replay gives `key: null`)",
                         {"scope": "worker", "label": "box 7", "expires_in_s": 2592000},
                         {"key_id": "ky_01m98wm4mgdhjbx9tv06j0a21p", "key": "kf_…", "scope": "worker",
                          "expires_at": "2026-12-30T12:00:00.000Z"}),
    "agent.key.list": ("`{items: [{key_id, scope, label, created_at, expires_at?, last_used_at?}]}`: live keys, oldest first, never a key", {},
                       {"items": [{"key_id": "ky_01m98wm4mgdhjbx9tv06j0a21p", "scope": "worker", "label": "box 7",
                                   "created_at": T0, "expires_at": "2026-12-30T12:00:00.000Z", "last_used_at": T0}]}),
    "agent.key.revoke": ("`{key_id, revoked: true}`", {"key_id": "ky_01m98wm4mgdhjbx9tv06j0a21p"},
                         {"key_id": "ky_01m98wm4mgdhjbx9tv06j0a21p", "revoked": True}),
    "search": ("page of `{kind, memory?, version?, thread?, entry?, task?, engagement?, assignment?, at, snippet, "
               "score}`: what the caller may read now, best first, newest first among equal scores; the cursor "
               "is always sealed",
               {"q": "upgrade \"breaking change\" deploy*", "in": ["entry", "memory"]},
               {"items": [{"kind": "entry", "thread": TH, "entry": 2, "at": T0,
                           "snippet": "write the upgrade notes: every breaking change before we deploy", "score": 3.1812},
                          {"kind": "memory", "memory": ME, "version": 1, "at": T0,
                           "snippet": "upgrade checklist … breaking change … deployment", "score": 2.2}],
                "cursor": "~3Jx0…"}),
    # wire.md 1.3: A2A
    "a2a.card.set": ("`{agent, card_url}`",
                     {"content": {"name": "Poet", "description": "Writes short poems."}, "accept": "any"},
                     {"agent": A, "card_url": f"http://127.0.0.1:8741/a2a/agents/{A}/.well-known/agent-card.json"}),
    "a2a.card.get": ("`{agent, content, accept, card_url}` (another's only while published)", {"agent": A},
                     {"agent": A, "content": {"name": "Poet", "description": "Writes short poems."}, "accept": "any",
                      "card_url": f"http://127.0.0.1:8741/a2a/agents/{A}/.well-known/agent-card.json"}),
    "a2a.card.clear": ("`{cleared: true}`", {}, {"cleared": True}),
    "a2a.send": ("create `{task, context, state}`; verdict `{task, engagement, verdict, state}`",
                 {"to": A, "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "a haiku"}]}},
                 {"task": TK, "context": CX, "state": "TASK_STATE_SUBMITTED"}),
    "a2a.cancel": ("`{task, state}`", {"task": TK}, {"task": TK, "state": "TASK_STATE_CANCELED"}),
    "a2a.task": ("the A2A 1.0 Task object: `{id, contextId, status, artifacts?, history?, metadata}`", {"task": TK},
                 {"id": TK, "contextId": CX, "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": T0},
                  "history": [{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "a haiku"}],
                               "taskId": TK, "contextId": CX}],
                  "metadata": {"urn:kungfud:a2a:kungfu:v1": {"state": "offered", "engagements": [], "generation": 1}}}),
    "a2a.tasks": ("`{items: [Task…], cursor}` (`cursor` `\"\"` at the end)", {"limit": 20}, {"items": [], "cursor": ""}),
    "a2a.push.set": ("`{task, config: {id, url, authentication?: {scheme}}}` (credentials never shown)",
                     {"task": TK, "config": {"url": "https://example.com/push", "authentication": {"scheme": "Bearer", "credentials": "…"}}},
                     {"task": TK, "config": {"id": "pc_01m9", "url": "https://example.com/push", "authentication": {"scheme": "Bearer"}}}),
    "a2a.push.list": ("`{items: [config…]}`", {"task": TK},
                      {"items": [{"id": "pc_01m9", "url": "https://example.com/push", "authentication": {"scheme": "Bearer"}}]}),
    "a2a.push.clear": ("`{cleared: true}`", {"task": TK, "config": "pc_01m9"}, {"cleared": True}),
}

#: event -> (when, data, example data).
EVENTS: list[tuple[str, str, str, Any]] = [
    ("turn", "your turn changed", "`{added: [turn item…], ended: [{obligation_id, why}]}`",
     {"added": [{"obligation_id": OB, "obligation": "deliver", "ref": {"thread": TH, "assignment": AS},
                 "created_at": T0, "due": T1, "next": "deliver"}], "ended": []}),
    ("opportunity", "work was offered to you", "an `opportunities` item",
     {"opportunity": "assignment", "ref": {"thread": TH, "assignment": AS}, "creator": A, "created_at": T0,
      "deliver_within_s": 3600, "judge_within_s": 600}),
    ("outcome", "work you took, made or judge ended (not sent to whoever ended it)", "an `outcomes` item",
     {"ref": {"thread": TH, "assignment": AS}, "state": "timed_out", "at": T1}),
    ("task_offered", "with `subscribe {open_tasks: true}` (wire.md 1.2): an open Task was created or resumed",
     "`{task, author, contract_version, at}`", {"task": TK, "author": A, "contract_version": 1, "at": T0}),
]

#: code -> (next, when).
CODES: dict[str, tuple[str, str]] = {
    "bad_request": ("revise", "the frame or its args are malformed: the reason says what is accepted"),
    "unauthenticated": ("stop", "no valid key: the connection is not an agent, or its key was rotated"),
    "not_found": ("stop", "the object does not exist or you may not read it (worded the same)"),
    "forbidden": ("stop", "you can read the object but may not do this (role, authorship, account state)"),
    "conflict": ("stop", "the object's state does not allow it now (closed, already delivered, deadline passed…)"),
    "idempotency_mismatch": ("stop", "this key was used for the same op with other args"),
    "rate_limited": ("wait", "too many requests: wait, then retry"),
    "too_large": ("revise", "content or a request over the configured size"),
    "unavailable": ("retry", "the daemon cannot serve it now (store unreachable, shutting down)"),
    "internal": ("retry", "a fault of the daemon's: retry; the action was not done"),
}
NEXT = {
    "retry": "send the same request again (an action with the same key)",
    "wait": "wait, then send it again",
    "revise": "change the request",
    "stop": "do not send it again; read the state (the hint, when there is one, is the call to make)",
}
