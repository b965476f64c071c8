// The TypeScript SDK against the real binary (built from this repository, or ROOKERY_BIN): node --test.
import { test, before, after } from "node:test";
import { EventSource } from "eventsource";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:http";
import { Rookery, RookeryError } from "../dist/index.js";
import { mintServerToken, mintUserToken, verifyWebhook } from "../dist/server.js";

const secret = "sdk-test-secret-sdk-test-secret-0123456789";
const work = mkdtempSync(join(tmpdir(), "rookery-ts-"));
let bin = process.env.ROOKERY_BIN;
const servers = [];

before(() => {
  if (!bin) {
    bin = join(work, "rookery");
    execFileSync("go", ["build", "-o", bin, "./cmd/rookery"], { cwd: "../..", stdio: "inherit" });
  }
});
after(() => {
  for (const s of servers) s.kill("SIGINT");
  rmSync(work, { recursive: true, force: true });
});

/** Starts `rookery serve` with args; resolves to its base URL. */
function serve(...args) {
  const dir = mkdtempSync(join(work, "data-"));
  const p = spawn(bin, ["serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn",
    "--webhooks-allow-http", "--webhooks-allow-private", ...args], { env: { ...process.env, ROOKERY_AUTH_SECRET: secret }, stdio: ["ignore", "pipe", "inherit"] });
  servers.push(p);
  return new Promise((resolve, reject) => {
    let out = "";
    p.stdout.on("data", (b) => {
      out += b;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    p.on("exit", (code) => reject(new Error(`rookery serve exited ${code}: ${out}`)));
  });
}

const sdk = (baseUrl, token, more = {}) => new Rookery({ baseUrl, token, ...more });
const all = async (it) => { const out = []; for await (const x of it) out.push(x); return out; };
async function eventually(what, cond) {
  for (const deadline = Date.now() + 15000; !(await cond());) {
    if (Date.now() > deadline) assert.fail(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("the routes through the SDK: users, follows, posts, the feed across pages, likes, comments, notifications, engagement, webhooks", async () => {
  const base = await serve();
  const server = sdk(base, mintServerToken(secret, "app"));
  const ann = sdk(base, mintUserToken(secret, "ann")), bob = sdk(base, mintUserToken(secret, "bob"));
  for (const u of ["ann", "bob"]) Rookery.check(await server.api.PUT("/v1/users/{id}", { params: { path: { id: u } }, body: { username: `${u}_ts` } }));
  await assert.rejects(async () => Rookery.check(await ann.api.GET("/v1/users/{id}", { params: { path: { id: "nobody" } } })),
    (e) => e instanceof RookeryError && e.code === "not_found" && e.status === 404);
  const user = Rookery.check(await ann.api.GET("/v1/usernames/{username}", { params: { path: { username: "BOB_ts" } } }));
  assert.equal(user.id, "bob");
  // An account deleted by its user is gone at once.
  Rookery.check(await server.api.PUT("/v1/users/{id}", { params: { path: { id: "gone" } }, body: { username: "gone_ts" } }));
  const gone = sdk(base, mintUserToken(secret, "gone"));
  Rookery.check(await gone.api.DELETE("/v1/users/{id}", { params: { path: { id: "gone" } } }));
  await assert.rejects(async () => Rookery.check(await ann.api.GET("/v1/users/{id}", { params: { path: { id: "gone" } } })),
    (e) => e instanceof RookeryError && e.code === "not_found" && e.status === 404);
  Rookery.check(await bob.api.PUT("/v1/users/{id}/following/{target}", { params: { path: { id: "bob", target: "ann" } } }));
  assert.deepEqual((await all(ann.followers("ann", 1))).map((f) => f.user_id), ["bob"]);
  assert.equal((await all(bob.following("bob", 1))).length, 1);

  const ids = [];
  for (let i = 0; i < 7; i++) ids.push(Rookery.check(await ann.api.POST("/v1/posts", { body: { text: `post ${i} #ts` } })).id);
  await eventually("bob's feed holds 7 posts", async () => (await all(bob.homeFeed(3))).length === 7);
  assert.deepEqual((await all(bob.homeFeed(3))).map((p) => p.id), [...ids].reverse());
  assert.equal((await all(bob.userPosts("ann", 2))).length, 7);
  await eventually("the tag lists 7", async () => (await all(bob.tagPosts("ts", 4))).length === 7);
  Rookery.check(await ann.api.PATCH("/v1/posts/{id}", { params: { path: { id: ids[0] } }, body: { text: "edited" } }));
  Rookery.check(await bob.api.PUT("/v1/posts/{id}/likes/{user}", { params: { path: { id: ids[1], user: "bob" } } }));
  assert.equal((await all(ann.likes(ids[1]))).length, 1);
  const c = Rookery.check(await bob.api.POST("/v1/posts/{id}/comments", { params: { path: { id: ids[1] } }, body: { text: "nice" } }));
  assert.deepEqual((await all(ann.comments(ids[1]))).map((x) => x.text), ["nice"]);
  await eventually("ann's 3 notifications", async () => (await all(ann.notifications({ unread: true, limit: 2 }))).length === 3);
  assert.equal(Rookery.check(await ann.api.GET("/v1/notifications/unread_count")).count, 3);
  Rookery.check(await ann.api.POST("/v1/notifications/read", { body: { all: true } }));
  Rookery.check(await bob.api.DELETE("/v1/posts/{id}/comments/{comment}", { params: { path: { id: ids[1], comment: c.id } } }));
  Rookery.check(await bob.api.DELETE("/v1/posts/{id}/likes/{user}", { params: { path: { id: ids[1], user: "bob" } } }));
  Rookery.check(await ann.api.DELETE("/v1/posts/{id}", { params: { path: { id: ids[2] } } }));
  for (const [method, kind] of [["PUT", "mutes"], ["GET", "mutes"], ["DELETE", "mutes"], ["PUT", "blocks"], ["GET", "blocks"], ["DELETE", "blocks"]]) {
    Rookery.check(await bob.api[method](`/v1/users/{id}/${kind}/{target}`, { params: { path: { id: "bob", target: "ann" } } }));
    if (method === "PUT") {
      const list = await all(kind === "mutes" ? bob.mutes("bob", 1) : bob.blocks("bob", 1));
      assert.deepEqual(list.map((r) => r.user_id), ["ann"]);
    }
  }
  Rookery.check(await bob.api.DELETE("/v1/users/{id}/following/{target}", { params: { path: { id: "bob", target: "ann" } } }));

  Rookery.check(await ann.api.POST("/v1/activities", { body: { type: "daily_open", idempotency_key: "open-1" } }));
  assert.equal(Rookery.check(await ann.api.GET("/v1/users/{id}/streak", { params: { path: { id: "ann" } } })).current_streak, 1);
  Rookery.check(await ann.api.GET("/v1/users/{id}/points", { params: { path: { id: "ann" }, query: { days: 7 } } }));
  Rookery.check(await ann.api.GET("/v1/leaderboards/streaks"));
  Rookery.check(await ann.api.GET("/v1/leaderboards/authors", { params: { query: { period: "day" } } }));
  Rookery.check(await ann.api.POST("/v1/stream/tickets"));
  const kinds = {};
  for await (const rec of ann.exportUser("ann")) kinds[rec.kind] = (kinds[rec.kind] ?? 0) + 1;
  assert.equal(kinds.profile, 1);
  assert.equal(kinds.post, 6); // 7 made, 1 deleted
  // A server token acts for a user.
  const forBob = sdk(base, mintServerToken(secret, "app"), { actingAs: "bob" });
  assert.equal(Rookery.check(await forBob.api.POST("/v1/posts", { body: { text: "by the app" } })).author.id, "bob");

  // A webhook delivery, verified with the SDK.
  let whSecret = "";
  const verified = new Promise((resolve) => {
    const recv = createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        res.end();
        recv.close();
        try { verifyWebhook(whSecret, req.headers, Buffer.concat(chunks)); resolve(null); } catch (e) { resolve(e); }
      });
    }).listen(0, "127.0.0.1", async () => {
      const wh = Rookery.check(await server.api.POST("/v1/webhooks", { body: { url: `http://127.0.0.1:${recv.address().port}/hook`, events: ["post.created"] } }));
      whSecret = wh.secret;
      Rookery.check(await server.api.POST("/v1/webhooks/{id}/test", { params: { path: { id: wh.id } } }));
    });
  });
  assert.equal(await verified, null);
  const hooks = Rookery.check(await server.api.GET("/v1/webhooks"));
  assert.equal(hooks.items.length, 1);
  const hook = { params: { path: { id: hooks.items[0].id } } };
  Rookery.check(await server.api.GET("/v1/webhooks/{id}", hook));
  Rookery.check(await server.api.PATCH("/v1/webhooks/{id}", { ...hook, body: { description: "ts" } }));
  Rookery.check(await server.api.POST("/v1/webhooks/{id}/rotate", hook));
  Rookery.check(await server.api.DELETE("/v1/webhooks/{id}", hook));

  // The rest of the routes, once each: operations, a follow's status, a post, dead letters, repair, backup.
  for (const path of ["/healthz", "/readyz"]) assert.equal((await server.api.GET(path)).response.status, 200);
  assert.equal((await server.api.GET("/metrics", { parseAs: "text" })).response.status, 200);
  Rookery.check(await ann.api.GET("/v1/posts/{id}", { params: { path: { id: ids[0] } } }));
  const notFollowing = await bob.api.GET("/v1/users/{id}/following/{target}", { params: { path: { id: "bob", target: "ann" } } });
  assert.equal(notFollowing.response.status, 404); // unfollowed above
  Rookery.check(await server.api.GET("/v1/admin/dlq/{group}", { params: { path: { group: "fanout" } } }));
  for (const [method, path] of [["GET", "/v1/admin/dlq/{group}/{id}"], ["DELETE", "/v1/admin/dlq/{group}/{id}"], ["POST", "/v1/admin/dlq/{group}/{id}/replay"]]) {
    const r = await server.api[method](path, { params: { path: { group: "fanout", id: "none" } } });
    assert.equal(r.response.status, 404, `${method} ${path}`);
  }
  const now = new Date();
  Rookery.check(await server.api.POST("/v1/admin/streaks/repair", { body: { from: new Date(now - 3600e3).toISOString(), to: now.toISOString() } }));
  assert.equal(Rookery.check(await server.api.POST("/v1/admin/backup", { body: { name: "ts" } })).name, "ts");
});

test("reads over the rate limit are retried after Retry-After; without retries the error is typed", async () => {
  const base = await serve("--rate-read", "2/2s");
  const server = sdk(base, mintServerToken(secret, "app"));
  Rookery.check(await server.api.PUT("/v1/users/{id}", { params: { path: { id: "cy" } }, body: { username: "cy_ts" } }));
  const cy = sdk(base, mintUserToken(secret, "cy"));
  const start = Date.now();
  for (let i = 0; i < 4; i++) Rookery.check(await cy.api.GET("/v1/users/{id}", { params: { path: { id: "cy" } } }));
  assert.ok(Date.now() - start >= 500, "nothing was retried");
  const noRetry = sdk(base, mintUserToken(secret, "cy"), { retries: 0 });
  let last;
  for (let i = 0; i < 4; i++) {
    try { Rookery.check(await noRetry.api.GET("/v1/users/{id}", { params: { path: { id: "cy" } } })); } catch (e) { last = e; }
  }
  assert.ok(last instanceof RookeryError && last.code === "rate_limited" && last.retryAfterMs > 0, String(last));
});

// The server's side is tested in its module (app's TestIdempotencyKeyInFlight): the window in which
// a first attempt still runs is too short to hit from here, so this server stands in for it.
test("a create whose first attempt still runs (409 with Retry-After) is sent again with its key; a 409 without is the caller's", async () => {
  const keys = [];
  const problem = (detail) => JSON.stringify({ type: "urn:rookery:problem:conflict", title: "Conflict", status: 409, detail, code: "conflict" });
  const stub = createServer((req, res) => {
    keys.push(req.headers["idempotency-key"]);
    req.resume();
    if (req.url === "/v1/posts" && keys.length === 1) {
      res.writeHead(409, { "Content-Type": "application/problem+json", "Retry-After": "0" }).end(problem("a request with this Idempotency-Key is being processed; retry"));
    } else if (req.url === "/v1/posts") {
      res.writeHead(201, { "Content-Type": "application/json" }).end(JSON.stringify({ id: "p1", text: "once" }));
    } else {
      res.writeHead(409, { "Content-Type": "application/problem+json" }).end(problem("this Idempotency-Key was used with a different request body"));
    }
  });
  await new Promise((resolve) => stub.listen(0, "127.0.0.1", resolve));
  try {
    const rk = sdk(`http://127.0.0.1:${stub.address().port}`, "tok");
    const post = Rookery.check(await rk.api.POST("/v1/posts", { body: { text: "once" } }));
    assert.equal(post.id, "p1");
    assert.equal(keys.length, 2);
    assert.ok(keys[0] && keys[0] === keys[1], `keys ${keys}`);
    await assert.rejects(async () => Rookery.check(await rk.api.POST("/v1/posts/{id}/comments", { params: { path: { id: "p1" } }, body: { text: "x" } })),
      (e) => e instanceof RookeryError && e.status === 409);
    assert.equal(keys.length, 3, "a 409 without Retry-After was retried");
  } finally {
    stub.close();
  }
});

test("the stream resumes with Last-Event-ID after its connection drops: every feed.post once, in order", async () => {
  const base = await serve();
  const server = sdk(base, mintServerToken(secret, "app"));
  for (const u of ["dee", "eve"]) Rookery.check(await server.api.PUT("/v1/users/{id}", { params: { path: { id: u } }, body: { username: `${u}_ts` } }));
  const eve = sdk(base, mintUserToken(secret, "eve"));
  Rookery.check(await eve.api.PUT("/v1/users/{id}/following/{target}", { params: { path: { id: "eve", target: "dee" } } }));
  // A fetch whose streams the test can cut.
  const live = [];
  const cutting = async (input, init) => {
    const ctl = new AbortController();
    init?.signal?.addEventListener("abort", () => ctl.abort());
    live.push(ctl);
    return fetch(input, { ...init, signal: ctl.signal });
  };
  const stop = new AbortController();
  const streamer = sdk(base, mintUserToken(secret, "eve"), { fetch: cutting });
  const got = [];
  const reading = (async () => {
    for await (const ev of streamer.stream({ signal: stop.signal })) if (ev.type === "feed.post") got.push(ev.data.post.id);
  })();
  await postAndCut(sdk(base, mintUserToken(secret, "dee")), got, live);
  stop.abort();
  await reading;
});

test("a stream connection that goes silent without closing is dropped after the stream timeout and resumed; heartbeats keep a quiet one", async () => {
  const base = await serve("--stream-heartbeat", "250ms");
  const server = sdk(base, mintServerToken(secret, "app"));
  for (const u of ["fay", "gus"]) Rookery.check(await server.api.PUT("/v1/users/{id}", { params: { path: { id: u } }, body: { username: `${u}_ts` } }));
  const gus = sdk(base, mintUserToken(secret, "gus"));
  Rookery.check(await gus.api.PUT("/v1/users/{id}/following/{target}", { params: { path: { id: "gus", target: "fay" } } }));
  // A fetch whose bodies the test can silence: from then on they bring nothing, and do not end.
  const silencers = [];
  const silenceable = async (input, init) => {
    const resp = await fetch(input, init);
    let quiet = false;
    const reader = resp.body.getReader();
    const body = new ReadableStream({
      async pull(ctl) {
        for (;;) {
          const { value, done } = await reader.read(); // rejects once the SDK aborts the connection
          if (done && quiet) await new Promise((_, fail) => init.signal.addEventListener("abort", () => fail(init.signal.reason), { once: true }));
          if (done) return ctl.close();
          if (!quiet) return ctl.enqueue(value);
        }
      },
      cancel: (why) => reader.cancel(why),
    });
    silencers.push(() => { quiet = true; });
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  const stop = new AbortController();
  const streamer = sdk(base, mintUserToken(secret, "gus"), { fetch: silenceable, streamTimeoutMs: 1000 });
  const got = [];
  const reading = (async () => {
    for await (const ev of streamer.stream({ signal: stop.signal })) if (ev.type === "feed.post") got.push(ev.data.post.id);
  })();
  const fay = sdk(base, mintUserToken(secret, "fay"));
  await eventually("the stream connects", () => silencers.length > 0);
  await new Promise((r) => setTimeout(r, 2500)); // quiet but for heartbeats, longer than the timeout
  assert.equal(silencers.length, 1, "a quiet stream with heartbeats reconnected");
  const want = [Rookery.check(await fay.api.POST("/v1/posts", { body: { text: "before" } })).id];
  await eventually("the post before the silence", () => got.length === 1);
  for (const silence of silencers) silence();
  want.push(Rookery.check(await fay.api.POST("/v1/posts", { body: { text: "after" } })).id);
  await eventually("the post after the connection went silent", () => got.length === 2);
  assert.ok(silencers.length >= 2, "the event came over the silent connection");
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(got, want);
  stop.abort();
  await reading;
});

/** Three rounds of: the author posts twice; after the first reaches the stream (got), every live
 * connection is cut; the second must arrive after the resume. In the end got holds every post
 * once, in order. */
async function postAndCut(author, got, live) {
  const want = [];
  await new Promise((r) => setTimeout(r, 300));
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 2; i++) want.push(Rookery.check(await author.api.POST("/v1/posts", { body: { text: `post ${want.length}` } })).id);
    await eventually(`round ${round}: the first post`, () => got.length >= 2 * round + 1);
    for (const c of live.splice(0)) c.abort(); // cut the stream
    await eventually(`round ${round}: the second post, after the resume`, () => got.length >= 2 * round + 2);
  }
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(got, want);
}

test("the EventSource stream opens with single-use tickets and resumes after its connection drops: every feed.post once, in order", async () => {
  const base = await serve();
  const server = sdk(base, mintServerToken(secret, "app"));
  for (const u of ["fay", "gus"]) Rookery.check(await server.api.PUT("/v1/users/{id}", { params: { path: { id: u } }, body: { username: `${u}_ts` } }));
  const gus = sdk(base, mintUserToken(secret, "gus"));
  Rookery.check(await gus.api.PUT("/v1/users/{id}/following/{target}", { params: { path: { id: "gus", target: "fay" } } }));
  // An EventSource (the eventsource package, as a browser's) whose connections the test can cut,
  // and that records the URLs it opened: tickets, never a token.
  const live = [], urls = [];
  class CuttableEventSource extends EventSource {
    constructor(url) {
      urls.push(url);
      super(url, {
        // A dropped connection, as a browser sees one: the body fails (an abort would read as the
        // EventSource's own close).
        fetch: async (input, init) => {
          const resp = await fetch(input, init);
          const reader = resp.body.getReader();
          let ctl;
          const body = new ReadableStream({
            start(c) { ctl = c; },
            async pull(c) { const { value, done } = await reader.read(); if (done) c.close(); else c.enqueue(value); },
            cancel(reason) { return reader.cancel(reason); },
          });
          live.push({ abort: () => { ctl.error(new TypeError("connection reset")); reader.cancel().catch(() => {}); } });
          return new Response(body, { status: resp.status, headers: resp.headers });
        },
      });
    }
  }
  const stop = new AbortController();
  const got = [];
  const reading = (async () => {
    for await (const ev of gus.eventSource({ signal: stop.signal, EventSource: CuttableEventSource })) if (ev.type === "feed.post") got.push(ev.data.post.id);
  })();
  await postAndCut(sdk(base, mintUserToken(secret, "fay")), got, live);
  stop.abort();
  await reading;
  assert.ok(urls.length >= 4, `${urls.length} connections`);
  const tickets = urls.map((u) => new URL(u).searchParams.get("ticket"));
  assert.equal(new Set(tickets).size, urls.length, "a ticket used twice");
  assert.ok(urls.every((u) => !u.includes("Bearer") && !/eyJ/.test(u)), "a token in a URL");
  assert.ok(urls.slice(1).every((u) => new URL(u).searchParams.get("last_event_id")), "a reconnection without the last id");
});
