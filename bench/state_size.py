"""What one post or one create rewrites: the bytes of the objects its facts touch
and the time to fold and encode them (twice, as the writer does), after N
members, N pending asks and untaken assignments, or N memberships. In-process,
no daemon: a deterministic view of per-action cost that load does not blur.
Runs against whichever kungfud PYTHONPATH names (the facts are the same)::

    python bench/state_size.py
    PYTHONPATH=/path/to/old/checkout python bench/state_size.py
"""

from __future__ import annotations

import time

from kungfud.core.atoms import apply_to
from kungfud.core.facts import ThreadCreated, MemberJoined, EntryPosted, AssignmentCreated
from kungfud.store.layout import encode_object

def objs_after(facts):
    states = {}
    for f in facts:
        for o in f.objects():
            states[o] = apply_to(o, states.get(o), f)
    return states

def cost(states, fact, reps=200):
    t0 = time.perf_counter()
    for _ in range(reps):
        size = 0
        for o in fact.objects():
            s = apply_to(o, states.get(o), fact)
            size += len(encode_object(1, s)) * 2  # the writer encodes twice
    return size // 2, (time.perf_counter() - t0) / reps * 1e3

T = "th_x"
for n in (10, 2000):
    facts = [ThreadCreated(at=1, by="ag_0", thread=T, creator="ag_0")]
    facts += [MemberJoined(at=2, by=f"ag_{i:05d}", thread=T, agent=f"ag_{i:05d}", role="speaker", admission="ad_1") for i in range(1, n)]
    st = objs_after(facts)
    post = EntryPosted(at=3, by="ag_0", thread=T, entry=1, author="ag_0", pin_memory="me_1", pin_version=1, responders=[])
    size, ms = cost(st, post)
    print(f"post, {n} members: objects rewritten {size} bytes, fold+encode {ms:.3f} ms")
for n in (0, 4000):
    facts = [ThreadCreated(at=1, by="ag_0", thread=T, creator="ag_0"), MemberJoined(at=2, by="ag_1", thread=T, agent="ag_1", role="speaker", admission="ad_1")]
    for e in range(1, n + 1):
        facts.append(EntryPosted(at=3, by="ag_0", thread=T, entry=e, author="ag_0", pin_memory="me_1", pin_version=1, responders=["ag_1"], ask=["ag_1"], assignment=f"as_{e:05d}"))
        facts.append(AssignmentCreated(at=3, by="ag_0", assignment=f"as_{e:05d}", thread=T, entry=e, creator="ag_0", to="ag_1", content=b"{}", deliver_within_s=1, judge_within_s=1))
    st = objs_after(facts)
    e = n + 1
    post = EntryPosted(at=3, by="ag_0", thread=T, entry=e, author="ag_0", pin_memory="me_1", pin_version=1, responders=["ag_1"], ask=["ag_1"], assignment=f"as_{e:05d}")
    size, ms = cost(st, post)
    print(f"ask+assign post, {n} pending/untaken before: objects rewritten {size} bytes, fold+encode {ms:.3f} ms")
for n in (1, 1560):
    facts = [ThreadCreated(at=1, by="ag_0", thread=f"th_{i:05d}", creator="ag_0") for i in range(n)]
    st = objs_after(facts)
    size, ms = cost(st, ThreadCreated(at=1, by="ag_0", thread="th_new", creator="ag_0"))
    print(f"thread.create, agent with {n} memberships: objects rewritten {size} bytes, fold+encode {ms:.3f} ms")
