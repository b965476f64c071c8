// Rookery's TypeScript SDK (Node 20+ and browsers). `api` is the typed client generated from
// docs/openapi.json (openapi-typescript + openapi-fetch: every path, parameter and reply typed);
// this module adds what a generator does not give: authentication, retries of 429 and 503 that
// honour Retry-After, typed errors, async iterators over every list, and the live stream with
// resume. Tokens and webhook verification are in "@rookery/sdk/server" (Node only: never ship the
// secret to a browser).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
export type Schemas = components["schemas"];
export type User = Schemas["User"];
export type Post = Schemas["Post"];
export type Comment = Schemas["Comment"];
export type Follow = Schemas["Follow"];
export type Blocked = Schemas["Blocked"];
export type Muted = Schemas["Muted"];
export type Like = Schemas["Like"];
export type Notification = Schemas["Notification"];
export type Streak = Schemas["Streak"];
export type FeedPostEvent = Schemas["FeedPostEvent"];
export type FeedRemoveEvent = Schemas["FeedRemoveEvent"];
export type NotificationEvent = Schemas["NotificationEvent"];

export interface RookeryOptions {
  /** The server, such as http://127.0.0.1:8080. */
  baseUrl: string;
  /** A bearer token (a user's; a server token only on servers). */
  token?: string;
  /** Asked for the token of every request (to refresh short-lived tokens). */
  tokenSource?: () => string | Promise<string>;
  /** With a server token: the user every request acts for (X-On-Behalf-Of). */
  actingAs?: string;
  /** Retries of a 429 or 503 (or of no answer) for reads and idempotent writes; default 4. */
  retries?: number;
  /** The longest Retry-After waited for; longer ones are the caller's to handle. Default 30 s. */
  maxWaitMs?: number;
  /** How long stream()'s connection may bring nothing, not even the server's heartbeat, before it
   * is taken for dead (a network that dropped it without closing it) and the stream resumes on a
   * new one. Default 45 s: three of the server's default heartbeats (--stream-heartbeat 15s); keep
   * it above twice the server's. 0: never. */
  streamTimeoutMs?: number;
  fetch?: typeof fetch;
}

/** A problem+json reply (docs/api.md): code is invalid, unauthenticated, forbidden, not_found,
 * conflict, too_large, rate_limited, unavailable or internal. */
export class RookeryError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly fields: { name: string; reason: string }[] = [],
    readonly requestId?: string,
    readonly retryAfterMs?: number,
  ) {
    super(`rookery: ${status} ${code}: ${detail}`);
    this.name = "RookeryError";
  }
}

/** One event of the live stream: type is feed.post, feed.update, feed.remove, notification, streak or reset. */
export interface StreamEvent {
  id: string;
  type: string;
  data: unknown;
}

interface Page<T> {
  items: T[];
  next_cursor?: string | null;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });

const newIdempotencyKey = () => crypto.randomUUID();

/** The fetch of every request: it adds an Idempotency-Key to the creating POSTs that lack one, and
 * sends a request again, after its Retry-After, when it is answered 429 or 503 (or not answered, or
 * 409 with a Retry-After: its key's first attempt still runs) and is safe to repeat: a read, or a
 * write with an Idempotency-Key. */
function retrying(base: typeof fetch, retries: number, maxWaitMs: number): typeof fetch {
  return async (input, init) => {
    let req = new Request(input, init);
    const path = new URL(req.url).pathname;
    if (req.method === "POST" && (path === "/v1/posts" || path.endsWith("/comments")) && !req.headers.has("Idempotency-Key")) {
      req.headers.set("Idempotency-Key", newIdempotencyKey());
    }
    const safe = req.method === "GET" || req.method === "HEAD" || req.headers.has("Idempotency-Key");
    for (let attempt = 0; ; attempt++) {
      const sent = safe && attempt < retries ? req.clone() : req;
      let resp: Response;
      try {
        resp = await base(sent);
      } catch (err) {
        if (!safe || attempt >= retries || req.signal.aborted) throw err;
        await sleep(100 * 2 ** attempt, req.signal);
        continue;
      }
      // A 409 with Retry-After is a key whose first request still runs (one that got no answer).
      const again = resp.status === 429 || resp.status === 503 || (resp.status === 409 && resp.headers.has("Retry-After"));
      if (!safe || attempt >= retries || !again) return resp;
      const header = resp.headers.get("Retry-After");
      const after = header === null ? NaN : Number(header);
      const wait = Number.isFinite(after) && after >= 0 ? after * 1000 : 100 * 2 ** attempt;
      if (wait > maxWaitMs) return resp;
      await resp.body?.cancel();
      await sleep(wait, req.signal);
    }
  };
}

/** The SDK: `api` for every operation (typed by path), the helpers for the rest. */
export class Rookery {
  readonly api: Client<paths>;
  private readonly baseUrl: string;
  private readonly fetchFn: typeof fetch;
  private readonly baseFetch: typeof fetch;
  private readonly auth: (headers: Headers) => Promise<void>;
  private readonly streamTimeoutMs: number;

  constructor(o: RookeryOptions) {
    this.streamTimeoutMs = o.streamTimeoutMs ?? 45_000;
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    const base = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.baseFetch = base;
    this.fetchFn = retrying(base, o.retries ?? 4, o.maxWaitMs ?? 30_000);
    this.auth = async (headers) => {
      const token = o.tokenSource ? await o.tokenSource() : o.token;
      if (token) headers.set("Authorization", `Bearer ${token}`);
      if (o.actingAs) headers.set("X-On-Behalf-Of", o.actingAs);
    };
    this.api = createClient<paths>({ baseUrl: this.baseUrl, fetch: this.fetchFn });
    this.api.use({ onRequest: async ({ request }) => { await this.auth(request.headers); return request; } });
  }

  /** Returns a call's data, or throws its problem as a RookeryError. */
  static check<T>(r: { data?: T; error?: unknown; response: Response }): T {
    if (r.response.ok) return r.data as T;
    const p = (r.error ?? {}) as { code?: string; detail?: string; fields?: { name: string; reason: string }[]; request_id?: string };
    const after = Number(r.response.headers.get("Retry-After"));
    throw new RookeryError(r.response.status, p.code ?? "internal", p.detail ?? r.response.statusText, p.fields ?? [], p.request_id,
      Number.isFinite(after) && r.response.headers.has("Retry-After") ? after * 1000 : undefined);
  }

  /** Iterates over every item of a list, a page of `limit` at a time, until the last page. */
  async *pages<T>(page: (cursor: string | undefined) => Promise<{ data?: Page<T>; error?: unknown; response: Response }>): AsyncGenerator<T> {
    let cursor: string | undefined;
    for (;;) {
      const p = Rookery.check(await page(cursor));
      yield* p.items;
      if (!p.next_cursor) return;
      cursor = p.next_cursor;
    }
  }

  homeFeed(limit?: number) {
    return this.pages<Post>((cursor) => this.api.GET("/v1/feed", { params: { query: { limit, cursor } } }));
  }
  userPosts(user: string, limit?: number) {
    return this.pages<Post>((cursor) => this.api.GET("/v1/users/{id}/posts", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  tagPosts(tag: string, limit?: number) {
    return this.pages<Post>((cursor) => this.api.GET("/v1/tags/{tag}/posts", { params: { path: { tag }, query: { limit, cursor } } }));
  }
  followers(user: string, limit?: number) {
    return this.pages<Follow>((cursor) => this.api.GET("/v1/users/{id}/followers", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  following(user: string, limit?: number) {
    return this.pages<Follow>((cursor) => this.api.GET("/v1/users/{id}/following", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  /** Whom user blocked, by user id (user's own, or any with a server token). */
  blocks(user: string, limit?: number) {
    return this.pages<Blocked>((cursor) => this.api.GET("/v1/users/{id}/blocks", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  /** Whom user muted, by user id (user's own, or any with a server token). */
  mutes(user: string, limit?: number) {
    return this.pages<Muted>((cursor) => this.api.GET("/v1/users/{id}/mutes", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  comments(post: string, limit?: number) {
    return this.pages<Comment>((cursor) => this.api.GET("/v1/posts/{id}/comments", { params: { path: { id: post }, query: { limit, cursor } } }));
  }
  likes(post: string, limit?: number) {
    return this.pages<Like>((cursor) => this.api.GET("/v1/posts/{id}/likes", { params: { path: { id: post }, query: { limit, cursor } } }));
  }
  notifications(opts: { unread?: boolean; limit?: number } = {}) {
    return this.pages<Notification>((cursor) => this.api.GET("/v1/notifications", { params: { query: { ...opts, cursor } } }));
  }

  /** A user's data export (the caller's, or anyone's with a server token): its records as the
   * server streams them (JSON lines). It checks the end line: an export that broke off throws. */
  async *exportUser(user: string): AsyncGenerator<{ kind: string; data: unknown }> {
    const r = await this.api.GET("/v1/users/{id}/export", { params: { path: { id: user } }, parseAs: "stream" });
    if (!r.response.ok) Rookery.check({ error: await r.response.json().catch(() => ({})), response: r.response });
    const reader = (r.data as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("rookery: the export ended without its end line; request it again");
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const rec = JSON.parse(buf.slice(0, nl)) as { kind: string; data: unknown };
        buf = buf.slice(nl + 1);
        if (rec.kind === "end") return;
        if (rec.kind === "error") throw new Error("rookery: the export broke off on the server; request it again");
        yield rec;
      }
    }
  }

  /** The URL a browser's EventSource opens the stream with (a ticket from POST /v1/stream/tickets). */
  streamTicketUrl(ticket: string): string {
    return `${this.baseUrl}/v1/stream?ticket=${encodeURIComponent(ticket)}`;
  }

  /** The caller's live stream from after `lastEventId` ("" or absent: from now), as one sequence:
   * when the connection drops it reconnects (backoff up to 30 s) with Last-Event-ID, so no event is
   * missed or repeated; a connection that brings nothing, not even a heartbeat, for
   * streamTimeoutMs counts as dropped. It ends with the signal, or throws an error that retrying
   * cannot mend. */
  async *stream(opts: { lastEventId?: string; signal?: AbortSignal } = {}): AsyncGenerator<StreamEvent> {
    let last = opts.lastEventId ?? "";
    let pause = 100;
    while (!opts.signal?.aborted) {
      let got = false;
      // The connection is dropped when a wait for it (its reply, each read) passes the timeout;
      // the time the caller spends on an event does not count.
      const conn = new AbortController();
      const stop = () => conn.abort();
      opts.signal?.addEventListener("abort", stop, { once: true });
      let timer: ReturnType<typeof setTimeout> | undefined;
      const quiet = {
        start: () => { if (this.streamTimeoutMs > 0) timer = setTimeout(stop, this.streamTimeoutMs); },
        stop: () => clearTimeout(timer),
      };
      try {
        const headers = new Headers({ Accept: "text/event-stream" });
        if (last) headers.set("Last-Event-ID", last);
        await this.auth(headers);
        // Not through the retrying fetch: the loop here reconnects, from the last id.
        quiet.start();
        const resp = await this.baseFetch(`${this.baseUrl}/v1/stream`, { headers, signal: conn.signal });
        quiet.stop();
        if (!resp.ok) {
          const error = await resp.json().catch(() => ({}));
          Rookery.check({ error, response: resp });
        }
        for await (const ev of sseEvents(resp.body!, quiet)) {
          if (ev.id) { last = ev.id; got = true; }
          if (ev.type) yield { id: ev.id, type: ev.type, data: JSON.parse(ev.data) };
        }
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (err instanceof RookeryError && err.status < 500 && err.status !== 429) throw err;
      } finally {
        quiet.stop();
        opts.signal?.removeEventListener("abort", stop);
        conn.abort(); // lets go of a connection the caller left
      }
      if (got) pause = 100;
      await sleep(pause, opts.signal);
      pause = Math.min(2 * pause, 30_000);
    }
  }

  /** The caller's live stream through an EventSource (the browser's by default; in Node pass one,
   * e.g. the eventsource package's), as one sequence like stream(): no token goes into a URL, each
   * connection opens with a new single-use stream ticket (POST /v1/stream/tickets) and resumes
   * after the last id it got (?last_event_id=). The EventSource's own reconnection is not used, since
   * it would send a spent ticket again: this closes it and reconnects (backoff up to 30 s). */
  async *eventSource(opts: { lastEventId?: string; signal?: AbortSignal; EventSource?: EventSourceConstructor } = {}): AsyncGenerator<StreamEvent> {
    const ES = opts.EventSource ?? (globalThis as { EventSource?: EventSourceConstructor }).EventSource;
    if (!ES) throw new Error("rookery: no EventSource here; pass one, or use stream()");
    let last = opts.lastEventId ?? "";
    let pause = 100;
    while (!opts.signal?.aborted) {
      let ticket: string;
      try {
        ({ ticket } = Rookery.check(await this.api.POST("/v1/stream/tickets", { signal: opts.signal })));
      } catch (err) {
        if (opts.signal?.aborted) return;
        if (err instanceof RookeryError && err.status < 500 && err.status !== 429) throw err;
        await sleep(pause, opts.signal);
        pause = Math.min(2 * pause, 30_000);
        continue;
      }
      let url = this.streamTicketUrl(ticket);
      if (last) url += `&last_event_id=${encodeURIComponent(last)}`;
      const es = new ES(url);
      const queue: (StreamEvent | null)[] = []; // null: the connection ended
      let wake: (() => void) | undefined;
      const push = (ev: StreamEvent | null) => { queue.push(ev); wake?.(); };
      for (const type of streamEventTypes) {
        es.addEventListener(type, (ev) => push({ id: ev.lastEventId, type, data: JSON.parse(ev.data) }));
      }
      es.onerror = () => push(null);
      const abort = () => push(null);
      opts.signal?.addEventListener("abort", abort, { once: true });
      let got = false;
      try {
        for (;;) {
          while (queue.length === 0) await new Promise<void>((r) => { wake = r; });
          const ev = queue.shift()!;
          if (ev === null) break;
          if (ev.id) { last = ev.id; got = true; pause = 100; }
          yield ev;
        }
      } finally {
        es.close();
        opts.signal?.removeEventListener("abort", abort);
      }
      if (opts.signal?.aborted) return;
      if (!got) {
        await sleep(pause, opts.signal);
        pause = Math.min(2 * pause, 30_000);
      }
    }
  }
}

/** What eventSource needs of an EventSource (the browser's, or a Node package's). */
export interface EventSourceLike {
  addEventListener(type: string, listener: (ev: { data: string; lastEventId: string }) => void): void;
  onerror: ((ev: unknown) => void) | null;
  close(): void;
}
export type EventSourceConstructor = new (url: string) => EventSourceLike;

/** The types of the stream's events (docs/api.md, Live streams). */
export const streamEventTypes = ["feed.post", "feed.update", "feed.remove", "notification", "streak", "reset"] as const;

/** The events of a Server-Sent Events body; wait is told when each read begins and ends. */
async function* sseEvents(body: ReadableStream<Uint8Array>, wait: { start(): void; stop(): void }): AsyncGenerator<{ id: string; type: string; data: string }> {
  const decoder = new TextDecoder();
  let buf = "";
  let ev = { id: "", type: "", data: [] as string[] };
  const reader = body.getReader();
  try {
    for (;;) {
      wait.start();
      const { value, done } = await reader.read().finally(wait.stop);
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (ev.id || ev.type) yield { id: ev.id, type: ev.type, data: ev.data.join("\n") };
          ev = { id: "", type: "", data: [] };
          continue;
        }
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "id") ev.id = value;
        else if (field === "event") ev.type = value;
        else if (field === "data") ev.data.push(value);
      }
    }
  } finally {
    reader.releaseLock();
  }
}
