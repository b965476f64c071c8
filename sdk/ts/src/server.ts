// Server-side helpers (Node): minting tokens for an app's users and its backend, and verifying
// webhook deliveries. They need the server's secret: keep them out of browsers.
import { createHmac, timingSafeEqual } from "node:crypto";

const b64url = (b: Buffer | string) => Buffer.from(b).toString("base64url");

function mint(secret: string | Uint8Array, sub: string, ttlSeconds: number, scope?: string): string {
  const key = typeof secret === "string" ? Buffer.from(secret) : Buffer.from(secret);
  if (key.length < 32) throw new Error("rookery: the secret must be at least 32 bytes");
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = { sub, iat: now, exp: now + ttlSeconds };
  if (scope) claims.scope = scope;
  const signing = `${b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${b64url(JSON.stringify(claims))}`;
  return `${signing}.${createHmac("sha256", key).update(signing).digest("base64url")}`;
}

/** An HS256 token for a signed-in user, signed with the server's --auth-secret. */
export const mintUserToken = (secret: string | Uint8Array, user: string, ttlSeconds = 3600) => mint(secret, user, ttlSeconds);

/** A server token (scope "server"): it may act for any user. Never give one to a client. */
export const mintServerToken = (secret: string | Uint8Array, sub: string, ttlSeconds = 3600) => mint(secret, sub, ttlSeconds, "server");

/** Checks a webhook delivery (Standard Webhooks): the timestamp within `toleranceSeconds` of now and
 * one of the webhook-signature values the endpoint secret's HMAC of "<id>.<timestamp>.<body>".
 * `body` must be the raw bytes received. Throws if it does not verify. */
export function verifyWebhook(secret: string, headers: Headers | Record<string, string | string[] | undefined>, body: string | Uint8Array, toleranceSeconds = 300): void {
  const get = (name: string) => {
    if (headers instanceof Headers) return headers.get(name) ?? "";
    const v = headers[name] ?? headers[name.toLowerCase()];
    return Array.isArray(v) ? v[0] : (v ?? "");
  };
  const id = get("webhook-id"), ts = get("webhook-timestamp"), sigs = get("webhook-signature");
  if (!id || !ts || !sigs) throw new Error("rookery: not a webhook delivery (a webhook-* header is missing)");
  const sec = Number(ts);
  if (!Number.isInteger(sec)) throw new Error("rookery: webhook-timestamp is not Unix seconds");
  if (Math.abs(Date.now() / 1000 - sec) > toleranceSeconds) throw new Error("rookery: webhook-timestamp is too far from now");
  const key = secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret);
  const want = createHmac("sha256", key).update(`${id}.${ts}.`).update(body).digest();
  for (const s of sigs.split(" ")) {
    if (!s.startsWith("v1,")) continue;
    const got = Buffer.from(s.slice(3), "base64");
    if (got.length === want.length && timingSafeEqual(got, want)) return;
  }
  throw new Error("rookery: no signature of the webhook matches the secret");
}
