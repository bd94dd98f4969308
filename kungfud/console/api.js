// The connection to the daemon's websocket (WIRE.md): `hello` as the first
// frame, requests and their answers, events with the resume point, and
// reconnecting — after which every request still unanswered is sent again
// with the same idempotency key, so an action takes effect at most once (L3).

import { notice, rejectionView } from "./dom.js";

const WS_PATH = (document.querySelector('meta[name="kungfu-ws-path"]') || {}).content || "/v1";

const newKey = () =>
  (crypto.randomUUID ? crypto.randomUUID() : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join(""));

// ---------------------------------------------------------------- connection

class Rejected extends Error {
  constructor(error) {
    super(error.reason);
    Object.assign(this, error);
  }
}

class Conn {
  constructor(key) {
    this.key = key;
    this.ws = null;
    this.online = false;
    this.n = 0;
    this.pending = new Map(); // id -> {text, resolve, reject}
    this.lastSeq = null; // newest event seq processed: resume point
    this.subscribed = false;
    this.stopped = false;
    this.backoff = 500;
    this.onEvent = () => {};
    this.onState = () => {};
    this.onLost = () => {};
  }
  url() {
    return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${WS_PATH}`;
  }
  // Open the socket and authenticate with `hello` as the first frame (a
  // browser cannot set an Authorization header on a websocket).
  open() {
    return new Promise((resolve, reject) => {
      let settled = false;
      const keyUsed = this.key;
      const ws = new WebSocket(this.url());
      this.ws = ws;
      this.helloId = `hello-${++this.n}`;
      ws.onopen = () => ws.send(JSON.stringify({ id: this.helloId, op: "hello", args: { key: this.key } }));
      ws.onmessage = (m) => {
        let msg;
        try {
          msg = JSON.parse(m.data);
        } catch {
          return;
        }
        if (msg.id === this.helloId) {
          settled = true;
          if (!msg.ok) {
            this.stopped = true;
            ws.close();
            reject(new Rejected(msg.error));
            return;
          }
          this.online = true;
          this.backoff = 500;
          this.onState("online");
          this.resume();
          resolve(msg.result);
          return;
        }
        this.receive(msg);
      };
      ws.onclose = (ev) => {
        const was = this.online;
        this.online = false;
        if (!settled) {
          settled = true;
          reject(new Rejected({ code: "unavailable", reason: `Could not reach the daemon at ${this.url()}.`, next: "retry" }));
        }
        // 4001: the key this socket authenticated with was rotated or reset.
        // After this tab's own rotation it already holds the new key.
        if (ev.code === 4001 && this.key === keyUsed) {
          this.stopped = true;
          this.onLost("This key no longer works (it was rotated or reset). Log in with the new key.");
          return;
        }
        if (this.stopped) return;
        if (was || this.everOnline) this.reconnect();
      };
    }).then((r) => ((this.everOnline = true), r));
  }
  reconnect() {
    this.onState("reconnecting");
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, 10000);
    setTimeout(() => {
      if (this.stopped) return;
      this.open().catch((e) => {
        if (e.code === "unauthenticated") this.onLost(`Your key was refused: ${e.reason}`);
      });
    }, wait);
  }
  // After (re)authenticating: subscribe again from the last seq seen, then
  // send every request still unanswered — actions with their original
  // idempotency key, so a retry takes effect at most once (L3).
  resume() {
    if (this.subscribed) this.sendSubscribe();
    for (const p of this.pending.values()) this.ws.send(p.text);
  }
  sendSubscribe() {
    const args = this.lastSeq === null ? {} : { since: this.lastSeq };
    this.subId = `sub-${++this.n}`;
    this.ws.send(JSON.stringify({ id: this.subId, op: "subscribe", args }));
  }
  subscribe() {
    this.subscribed = true;
    if (this.online) this.sendSubscribe();
  }
  receive(msg) {
    if (msg.event) {
      this.onEvent(msg);
      if (typeof msg.seq === "number") this.lastSeq = Math.max(this.lastSeq ?? 0, msg.seq);
      return;
    }
    if (msg.id === this.subId) {
      if (msg.ok && this.lastSeq === null) this.lastSeq = msg.result.seq;
      if (!msg.ok) notice(rejectionView(msg.error), "error");
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.ok) p.resolve(msg.result);
    else p.reject(new Rejected(msg.error));
  }
  call(op, args, key) {
    const id = `c${++this.n}`;
    const frame = { id, op, args: args || {} };
    if (key) frame.key = key;
    const text = JSON.stringify(frame);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { text, resolve, reject });
      if (this.online) this.ws.send(text); // else sent by resume()
    });
  }
  read(op, args) {
    return this.call(op, args);
  }
  act(op, args, key) {
    return this.call(op, args, key || newKey());
  }
  close() {
    this.stopped = true;
    if (this.ws) this.ws.close();
  }
}

export { WS_PATH, newKey, Rejected, Conn };
