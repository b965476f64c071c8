// ../sdk/ts/node_modules/openapi-fetch/dist/index.mjs
var PATH_PARAM_RE = /\{[^{}]+\}/g;
var supportsRequestInitExt = () => {
  return typeof process === "object" && Number.parseInt(process?.versions?.node?.substring(0, 2)) >= 18 && process.versions.undici;
};
function randomID() {
  return Math.random().toString(36).slice(2, 11);
}
function createClient(clientOptions) {
  let {
    baseUrl = "",
    Request: CustomRequest = globalThis.Request,
    fetch: baseFetch = globalThis.fetch,
    querySerializer: globalQuerySerializer,
    bodySerializer: globalBodySerializer,
    pathSerializer: globalPathSerializer,
    headers: baseHeaders,
    requestInitExt = void 0,
    ...baseOptions
  } = { ...clientOptions };
  requestInitExt = supportsRequestInitExt() ? requestInitExt : void 0;
  baseUrl = removeTrailingSlash(baseUrl);
  const globalMiddlewares = [];
  async function coreFetch(schemaPath, fetchOptions) {
    const {
      baseUrl: localBaseUrl,
      fetch: fetch2 = baseFetch,
      Request: Request2 = CustomRequest,
      headers,
      params = {},
      parseAs = "json",
      querySerializer: requestQuerySerializer,
      bodySerializer = globalBodySerializer ?? defaultBodySerializer,
      pathSerializer: requestPathSerializer,
      body,
      middleware: requestMiddlewares = [],
      ...init
    } = fetchOptions || {};
    let finalBaseUrl = baseUrl;
    if (localBaseUrl) {
      finalBaseUrl = removeTrailingSlash(localBaseUrl) ?? baseUrl;
    }
    let querySerializer = typeof globalQuerySerializer === "function" ? globalQuerySerializer : createQuerySerializer(globalQuerySerializer);
    if (requestQuerySerializer) {
      querySerializer = typeof requestQuerySerializer === "function" ? requestQuerySerializer : createQuerySerializer({
        ...typeof globalQuerySerializer === "object" ? globalQuerySerializer : {},
        ...requestQuerySerializer
      });
    }
    const pathSerializer = requestPathSerializer || globalPathSerializer || defaultPathSerializer;
    const serializedBody = body === void 0 ? void 0 : bodySerializer(
      body,
      // Note: we declare mergeHeaders() both here and below because it’s a bit of a chicken-or-egg situation:
      // bodySerializer() needs all headers so we aren’t dropping ones set by the user, however,
      // the result of this ALSO sets the lowest-priority content-type header. So we re-merge below,
      // setting the content-type at the very beginning to be overwritten.
      // Lastly, based on the way headers work, it’s not a simple “present-or-not” check becauase null intentionally un-sets headers.
      mergeHeaders(baseHeaders, headers, params.header)
    );
    const finalHeaders = mergeHeaders(
      // with no body, we should not to set Content-Type
      serializedBody === void 0 || // if serialized body is FormData; browser will correctly set Content-Type & boundary expression
      serializedBody instanceof FormData ? {} : {
        "Content-Type": "application/json"
      },
      baseHeaders,
      headers,
      params.header
    );
    const finalMiddlewares = [...globalMiddlewares, ...requestMiddlewares];
    const requestInit = {
      redirect: "follow",
      ...baseOptions,
      ...init,
      body: serializedBody,
      headers: finalHeaders
    };
    let id;
    let options;
    let request = new Request2(
      createFinalURL(schemaPath, { baseUrl: finalBaseUrl, params, querySerializer, pathSerializer }),
      requestInit
    );
    let response;
    for (const key in init) {
      if (!(key in request)) {
        request[key] = init[key];
      }
    }
    if (finalMiddlewares.length) {
      id = randomID();
      options = Object.freeze({
        baseUrl: finalBaseUrl,
        fetch: fetch2,
        parseAs,
        querySerializer,
        bodySerializer,
        pathSerializer
      });
      for (const m of finalMiddlewares) {
        if (m && typeof m === "object" && typeof m.onRequest === "function") {
          const result = await m.onRequest({
            request,
            schemaPath,
            params,
            options,
            id
          });
          if (result) {
            if (result instanceof Request2) {
              request = result;
            } else if (result instanceof Response) {
              response = result;
              break;
            } else {
              throw new Error("onRequest: must return new Request() or Response() when modifying the request");
            }
          }
        }
      }
    }
    if (!response) {
      try {
        response = await fetch2(request, requestInitExt);
      } catch (error2) {
        let errorAfterMiddleware = error2;
        if (finalMiddlewares.length) {
          for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
            const m = finalMiddlewares[i];
            if (m && typeof m === "object" && typeof m.onError === "function") {
              const result = await m.onError({
                request,
                error: errorAfterMiddleware,
                schemaPath,
                params,
                options,
                id
              });
              if (result) {
                if (result instanceof Response) {
                  errorAfterMiddleware = void 0;
                  response = result;
                  break;
                }
                if (result instanceof Error) {
                  errorAfterMiddleware = result;
                  continue;
                }
                throw new Error("onError: must return new Response() or instance of Error");
              }
            }
          }
        }
        if (errorAfterMiddleware) {
          throw errorAfterMiddleware;
        }
      }
      if (finalMiddlewares.length) {
        for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
          const m = finalMiddlewares[i];
          if (m && typeof m === "object" && typeof m.onResponse === "function") {
            const result = await m.onResponse({
              request,
              response,
              schemaPath,
              params,
              options,
              id
            });
            if (result) {
              if (!(result instanceof Response)) {
                throw new Error("onResponse: must return new Response() when modifying the response");
              }
              response = result;
            }
          }
        }
      }
    }
    const contentLength = response.headers.get("Content-Length");
    if (response.status === 204 || request.method === "HEAD" || contentLength === "0" && !response.headers.get("Transfer-Encoding")?.includes("chunked")) {
      return response.ok ? { data: void 0, response } : { error: void 0, response };
    }
    if (response.ok) {
      const getResponseData = async () => {
        if (parseAs === "stream") {
          return response.body;
        }
        if (parseAs === "json" && !contentLength) {
          const raw = await response.text();
          return raw ? JSON.parse(raw) : void 0;
        }
        return await response[parseAs]();
      };
      return { data: await getResponseData(), response };
    }
    let error = await response.text();
    try {
      error = JSON.parse(error);
    } catch {
    }
    return { error, response };
  }
  return {
    request(method, url, init) {
      return coreFetch(url, { ...init, method: method.toUpperCase() });
    },
    /** Call a GET endpoint */
    GET(url, init) {
      return coreFetch(url, { ...init, method: "GET" });
    },
    /** Call a PUT endpoint */
    PUT(url, init) {
      return coreFetch(url, { ...init, method: "PUT" });
    },
    /** Call a POST endpoint */
    POST(url, init) {
      return coreFetch(url, { ...init, method: "POST" });
    },
    /** Call a DELETE endpoint */
    DELETE(url, init) {
      return coreFetch(url, { ...init, method: "DELETE" });
    },
    /** Call a OPTIONS endpoint */
    OPTIONS(url, init) {
      return coreFetch(url, { ...init, method: "OPTIONS" });
    },
    /** Call a HEAD endpoint */
    HEAD(url, init) {
      return coreFetch(url, { ...init, method: "HEAD" });
    },
    /** Call a PATCH endpoint */
    PATCH(url, init) {
      return coreFetch(url, { ...init, method: "PATCH" });
    },
    /** Call a TRACE endpoint */
    TRACE(url, init) {
      return coreFetch(url, { ...init, method: "TRACE" });
    },
    /** Register middleware */
    use(...middleware) {
      for (const m of middleware) {
        if (!m) {
          continue;
        }
        if (typeof m !== "object" || !("onRequest" in m || "onResponse" in m || "onError" in m)) {
          throw new Error("Middleware must be an object with one of `onRequest()`, `onResponse() or `onError()`");
        }
        globalMiddlewares.push(m);
      }
    },
    /** Unregister middleware */
    eject(...middleware) {
      for (const m of middleware) {
        const i = globalMiddlewares.indexOf(m);
        if (i !== -1) {
          globalMiddlewares.splice(i, 1);
        }
      }
    }
  };
}
function serializePrimitiveParam(name, value, options) {
  if (value === void 0 || value === null) {
    return "";
  }
  if (typeof value === "object") {
    throw new Error(
      "Deeply-nested arrays/objects aren\u2019t supported. Provide your own `querySerializer()` to handle these."
    );
  }
  return `${name}=${options?.allowReserved === true ? value : encodeURIComponent(value)}`;
}
function serializeObjectParam(name, value, options) {
  if (!value || typeof value !== "object") {
    return "";
  }
  const values = [];
  const joiner = {
    simple: ",",
    label: ".",
    matrix: ";"
  }[options.style] || "&";
  if (options.style !== "deepObject" && options.explode === false) {
    for (const k in value) {
      values.push(k, options.allowReserved === true ? value[k] : encodeURIComponent(value[k]));
    }
    const final2 = values.join(",");
    switch (options.style) {
      case "form": {
        return `${name}=${final2}`;
      }
      case "label": {
        return `.${final2}`;
      }
      case "matrix": {
        return `;${name}=${final2}`;
      }
      default: {
        return final2;
      }
    }
  }
  for (const k in value) {
    const finalName = options.style === "deepObject" ? `${name}[${k}]` : k;
    values.push(serializePrimitiveParam(finalName, value[k], options));
  }
  const final = values.join(joiner);
  return options.style === "label" || options.style === "matrix" ? `${joiner}${final}` : final;
}
function serializeArrayParam(name, value, options) {
  if (!Array.isArray(value)) {
    return "";
  }
  if (options.explode === false) {
    const joiner2 = { form: ",", spaceDelimited: "%20", pipeDelimited: "|" }[options.style] || ",";
    const final = (options.allowReserved === true ? value : value.map((v) => encodeURIComponent(v))).join(joiner2);
    switch (options.style) {
      case "simple": {
        return final;
      }
      case "label": {
        return `.${final}`;
      }
      case "matrix": {
        return `;${name}=${final}`;
      }
      // case "spaceDelimited":
      // case "pipeDelimited":
      default: {
        return `${name}=${final}`;
      }
    }
  }
  const joiner = { simple: ",", label: ".", matrix: ";" }[options.style] || "&";
  const values = [];
  for (const v of value) {
    if (options.style === "simple" || options.style === "label") {
      values.push(options.allowReserved === true ? v : encodeURIComponent(v));
    } else {
      values.push(serializePrimitiveParam(name, v, options));
    }
  }
  return options.style === "label" || options.style === "matrix" ? `${joiner}${values.join(joiner)}` : values.join(joiner);
}
function createQuerySerializer(options) {
  return function querySerializer(queryParams) {
    const search = [];
    if (queryParams && typeof queryParams === "object") {
      for (const name in queryParams) {
        const value = queryParams[name];
        if (value === void 0 || value === null) {
          continue;
        }
        if (Array.isArray(value)) {
          if (value.length === 0) {
            continue;
          }
          search.push(
            serializeArrayParam(name, value, {
              style: "form",
              explode: true,
              ...options?.array,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        if (typeof value === "object") {
          search.push(
            serializeObjectParam(name, value, {
              style: "deepObject",
              explode: true,
              ...options?.object,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        search.push(serializePrimitiveParam(name, value, options));
      }
    }
    return search.join("&");
  };
}
function defaultPathSerializer(pathname, pathParams) {
  let nextURL = pathname;
  for (const match of pathname.match(PATH_PARAM_RE) ?? []) {
    let name = match.substring(1, match.length - 1);
    let explode = false;
    let style = "simple";
    if (name.endsWith("*")) {
      explode = true;
      name = name.substring(0, name.length - 1);
    }
    if (name.startsWith(".")) {
      style = "label";
      name = name.substring(1);
    } else if (name.startsWith(";")) {
      style = "matrix";
      name = name.substring(1);
    }
    if (!pathParams || pathParams[name] === void 0 || pathParams[name] === null) {
      continue;
    }
    const value = pathParams[name];
    if (Array.isArray(value)) {
      nextURL = nextURL.replace(match, serializeArrayParam(name, value, { style, explode }));
      continue;
    }
    if (typeof value === "object") {
      nextURL = nextURL.replace(match, serializeObjectParam(name, value, { style, explode }));
      continue;
    }
    if (style === "matrix") {
      nextURL = nextURL.replace(match, `;${serializePrimitiveParam(name, value)}`);
      continue;
    }
    nextURL = nextURL.replace(match, style === "label" ? `.${encodeURIComponent(value)}` : encodeURIComponent(value));
  }
  return nextURL;
}
function defaultBodySerializer(body, headers) {
  if (body instanceof FormData) {
    return body;
  }
  if (headers) {
    const contentType = headers.get instanceof Function ? headers.get("Content-Type") ?? headers.get("content-type") : headers["Content-Type"] ?? headers["content-type"];
    if (contentType === "application/x-www-form-urlencoded") {
      return new URLSearchParams(body).toString();
    }
  }
  return JSON.stringify(body);
}
function createFinalURL(pathname, options) {
  let finalURL = `${options.baseUrl}${pathname}`;
  if (options.params?.path) {
    finalURL = options.pathSerializer(finalURL, options.params.path);
  }
  let search = options.querySerializer(options.params.query ?? {});
  if (search.startsWith("?")) {
    search = search.substring(1);
  }
  if (search) {
    finalURL += `?${search}`;
  }
  return finalURL;
}
function mergeHeaders(...allHeaders) {
  const finalHeaders = new Headers();
  for (const h of allHeaders) {
    if (!h || typeof h !== "object") {
      continue;
    }
    const iterator = h instanceof Headers ? h.entries() : Object.entries(h);
    for (const [k, v] of iterator) {
      if (v === null) {
        finalHeaders.delete(k);
      } else if (Array.isArray(v)) {
        for (const v2 of v) {
          finalHeaders.append(k, v2);
        }
      } else if (v !== void 0) {
        finalHeaders.set(k, v);
      }
    }
  }
  return finalHeaders;
}
function removeTrailingSlash(url) {
  if (url.endsWith("/")) {
    return url.substring(0, url.length - 1);
  }
  return url;
}

// ../sdk/ts/dist/index.js
var RookeryError = class extends Error {
  status;
  code;
  detail;
  fields;
  requestId;
  retryAfterMs;
  constructor(status, code, detail, fields = [], requestId, retryAfterMs) {
    super(`rookery: ${status} ${code}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.fields = fields;
    this.requestId = requestId;
    this.retryAfterMs = retryAfterMs;
    this.name = "RookeryError";
  }
};
var sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => {
    clearTimeout(t);
    resolve();
  }, { once: true });
});
var newIdempotencyKey = () => crypto.randomUUID();
function retrying(base, retries, maxWaitMs) {
  return async (input, init) => {
    let req = new Request(input, init);
    const path = new URL(req.url).pathname;
    if (req.method === "POST" && (path === "/v1/posts" || path.endsWith("/comments")) && !req.headers.has("Idempotency-Key")) {
      req.headers.set("Idempotency-Key", newIdempotencyKey());
    }
    const safe = req.method === "GET" || req.method === "HEAD" || req.headers.has("Idempotency-Key");
    for (let attempt = 0; ; attempt++) {
      const sent = safe && attempt < retries ? req.clone() : req;
      let resp;
      try {
        resp = await base(sent);
      } catch (err) {
        if (!safe || attempt >= retries || req.signal.aborted)
          throw err;
        await sleep(100 * 2 ** attempt, req.signal);
        continue;
      }
      const again = resp.status === 429 || resp.status === 503 || resp.status === 409 && resp.headers.has("Retry-After");
      if (!safe || attempt >= retries || !again)
        return resp;
      const header = resp.headers.get("Retry-After");
      const after = header === null ? NaN : Number(header);
      const wait = Number.isFinite(after) && after >= 0 ? after * 1e3 : 100 * 2 ** attempt;
      if (wait > maxWaitMs)
        return resp;
      await resp.body?.cancel();
      await sleep(wait, req.signal);
    }
  };
}
var Rookery = class _Rookery {
  api;
  baseUrl;
  fetchFn;
  baseFetch;
  auth;
  streamTimeoutMs;
  constructor(o) {
    this.streamTimeoutMs = o.streamTimeoutMs ?? 45e3;
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    const base = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.baseFetch = base;
    this.fetchFn = retrying(base, o.retries ?? 4, o.maxWaitMs ?? 3e4);
    this.auth = async (headers) => {
      const token = o.tokenSource ? await o.tokenSource() : o.token;
      if (token)
        headers.set("Authorization", `Bearer ${token}`);
      if (o.actingAs)
        headers.set("X-On-Behalf-Of", o.actingAs);
    };
    this.api = createClient({ baseUrl: this.baseUrl, fetch: this.fetchFn });
    this.api.use({ onRequest: async ({ request }) => {
      await this.auth(request.headers);
      return request;
    } });
  }
  /** Returns a call's data, or throws its problem as a RookeryError. */
  static check(r) {
    if (r.response.ok)
      return r.data;
    const p = r.error ?? {};
    const after = Number(r.response.headers.get("Retry-After"));
    throw new RookeryError(r.response.status, p.code ?? "internal", p.detail ?? r.response.statusText, p.fields ?? [], p.request_id, Number.isFinite(after) && r.response.headers.has("Retry-After") ? after * 1e3 : void 0);
  }
  /** Iterates over every item of a list, a page of `limit` at a time, until the last page. */
  async *pages(page) {
    let cursor;
    for (; ; ) {
      const p = _Rookery.check(await page(cursor));
      yield* p.items;
      if (!p.next_cursor)
        return;
      cursor = p.next_cursor;
    }
  }
  homeFeed(limit) {
    return this.pages((cursor) => this.api.GET("/v1/feed", { params: { query: { limit, cursor } } }));
  }
  userPosts(user, limit) {
    return this.pages((cursor) => this.api.GET("/v1/users/{id}/posts", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  tagPosts(tag, limit) {
    return this.pages((cursor) => this.api.GET("/v1/tags/{tag}/posts", { params: { path: { tag }, query: { limit, cursor } } }));
  }
  followers(user, limit) {
    return this.pages((cursor) => this.api.GET("/v1/users/{id}/followers", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  following(user, limit) {
    return this.pages((cursor) => this.api.GET("/v1/users/{id}/following", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  /** Whom user blocked, by user id (user's own, or any with a server token). */
  blocks(user, limit) {
    return this.pages((cursor) => this.api.GET("/v1/users/{id}/blocks", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  /** Whom user muted, by user id (user's own, or any with a server token). */
  mutes(user, limit) {
    return this.pages((cursor) => this.api.GET("/v1/users/{id}/mutes", { params: { path: { id: user }, query: { limit, cursor } } }));
  }
  comments(post, limit) {
    return this.pages((cursor) => this.api.GET("/v1/posts/{id}/comments", { params: { path: { id: post }, query: { limit, cursor } } }));
  }
  likes(post, limit) {
    return this.pages((cursor) => this.api.GET("/v1/posts/{id}/likes", { params: { path: { id: post }, query: { limit, cursor } } }));
  }
  notifications(opts = {}) {
    return this.pages((cursor) => this.api.GET("/v1/notifications", { params: { query: { ...opts, cursor } } }));
  }
  /** A user's data export (the caller's, or anyone's with a server token): its records as the
   * server streams them (JSON lines). It checks the end line: an export that broke off throws. */
  async *exportUser(user) {
    const r = await this.api.GET("/v1/users/{id}/export", { params: { path: { id: user } }, parseAs: "stream" });
    if (!r.response.ok)
      _Rookery.check({ error: await r.response.json().catch(() => ({})), response: r.response });
    const reader = r.data.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (; ; ) {
      const { value, done } = await reader.read();
      if (done)
        throw new Error("rookery: the export ended without its end line; request it again");
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const rec = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (rec.kind === "end")
          return;
        if (rec.kind === "error")
          throw new Error("rookery: the export broke off on the server; request it again");
        yield rec;
      }
    }
  }
  /** The URL a browser's EventSource opens the stream with (a ticket from POST /v1/stream/tickets). */
  streamTicketUrl(ticket) {
    return `${this.baseUrl}/v1/stream?ticket=${encodeURIComponent(ticket)}`;
  }
  /** The caller's live stream from after `lastEventId` ("" or absent: from now), as one sequence:
   * when the connection drops it reconnects (backoff up to 30 s) with Last-Event-ID, so no event is
   * missed or repeated; a connection that brings nothing, not even a heartbeat, for
   * streamTimeoutMs counts as dropped. It ends with the signal, or throws an error that retrying
   * cannot mend. */
  async *stream(opts = {}) {
    let last = opts.lastEventId ?? "";
    let pause = 100;
    while (!opts.signal?.aborted) {
      let got = false;
      const conn = new AbortController();
      const stop = () => conn.abort();
      opts.signal?.addEventListener("abort", stop, { once: true });
      let timer;
      const quiet = {
        start: () => {
          if (this.streamTimeoutMs > 0)
            timer = setTimeout(stop, this.streamTimeoutMs);
        },
        stop: () => clearTimeout(timer)
      };
      try {
        const headers = new Headers({ Accept: "text/event-stream" });
        if (last)
          headers.set("Last-Event-ID", last);
        await this.auth(headers);
        quiet.start();
        const resp = await this.baseFetch(`${this.baseUrl}/v1/stream`, { headers, signal: conn.signal });
        quiet.stop();
        if (!resp.ok) {
          const error = await resp.json().catch(() => ({}));
          _Rookery.check({ error, response: resp });
        }
        for await (const ev of sseEvents(resp.body, quiet)) {
          if (ev.id) {
            last = ev.id;
            got = true;
          }
          if (ev.type)
            yield { id: ev.id, type: ev.type, data: JSON.parse(ev.data) };
        }
      } catch (err) {
        if (opts.signal?.aborted)
          return;
        if (err instanceof RookeryError && err.status < 500 && err.status !== 429)
          throw err;
      } finally {
        quiet.stop();
        opts.signal?.removeEventListener("abort", stop);
        conn.abort();
      }
      if (got)
        pause = 100;
      await sleep(pause, opts.signal);
      pause = Math.min(2 * pause, 3e4);
    }
  }
  /** The caller's live stream through an EventSource (the browser's by default; in Node pass one,
   * e.g. the eventsource package's), as one sequence like stream(): no token goes into a URL, each
   * connection opens with a new single-use stream ticket (POST /v1/stream/tickets) and resumes
   * after the last id it got (?last_event_id=). The EventSource's own reconnection is not used, since
   * it would send a spent ticket again: this closes it and reconnects (backoff up to 30 s). */
  async *eventSource(opts = {}) {
    const ES = opts.EventSource ?? globalThis.EventSource;
    if (!ES)
      throw new Error("rookery: no EventSource here; pass one, or use stream()");
    let last = opts.lastEventId ?? "";
    let pause = 100;
    while (!opts.signal?.aborted) {
      let ticket;
      try {
        ({ ticket } = _Rookery.check(await this.api.POST("/v1/stream/tickets", { signal: opts.signal })));
      } catch (err) {
        if (opts.signal?.aborted)
          return;
        if (err instanceof RookeryError && err.status < 500 && err.status !== 429)
          throw err;
        await sleep(pause, opts.signal);
        pause = Math.min(2 * pause, 3e4);
        continue;
      }
      let url = this.streamTicketUrl(ticket);
      if (last)
        url += `&last_event_id=${encodeURIComponent(last)}`;
      const es = new ES(url);
      const queue = [];
      let wake;
      const push = (ev) => {
        queue.push(ev);
        wake?.();
      };
      for (const type of streamEventTypes) {
        es.addEventListener(type, (ev) => push({ id: ev.lastEventId, type, data: JSON.parse(ev.data) }));
      }
      es.onerror = () => push(null);
      const abort = () => push(null);
      opts.signal?.addEventListener("abort", abort, { once: true });
      let got = false;
      try {
        for (; ; ) {
          while (queue.length === 0)
            await new Promise((r) => {
              wake = r;
            });
          const ev = queue.shift();
          if (ev === null)
            break;
          if (ev.id) {
            last = ev.id;
            got = true;
            pause = 100;
          }
          yield ev;
        }
      } finally {
        es.close();
        opts.signal?.removeEventListener("abort", abort);
      }
      if (opts.signal?.aborted)
        return;
      if (!got) {
        await sleep(pause, opts.signal);
        pause = Math.min(2 * pause, 3e4);
      }
    }
  }
};
var streamEventTypes = ["feed.post", "feed.update", "feed.remove", "notification", "streak", "reset"];
async function* sseEvents(body, wait) {
  const decoder = new TextDecoder();
  let buf = "";
  let ev = { id: "", type: "", data: [] };
  const reader = body.getReader();
  try {
    for (; ; ) {
      wait.start();
      const { value, done } = await reader.read().finally(wait.stop);
      if (done)
        return;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (ev.id || ev.type)
            yield { id: ev.id, type: ev.type, data: ev.data.join("\n") };
          ev = { id: "", type: "", data: [] };
          continue;
        }
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const value2 = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "id")
          ev.id = value2;
        else if (field === "event")
          ev.type = value2;
        else if (field === "data")
          ev.data.push(value2);
      }
    }
  } finally {
    reader.releaseLock();
  }
}

// src/app.js
var $ = (id) => document.getElementById(id);
var el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
};
var rk;
var me;
var feedIter;
var feedLoading = false;
var feedDone = false;
var stopStream;
var shown = /* @__PURE__ */ new Set();
async function signIn(user) {
  const r = await fetch("session", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ user }) });
  if (!r.ok) throw new Error((await r.json().catch(() => ({}))).detail ?? r.statusText);
  const s = await r.json();
  me = s.user;
  rk = new Rookery({ baseUrl: location.origin, token: s.token });
  $("me").textContent = me;
  $("signin").hidden = true;
  $("app").hidden = false;
  show("feed");
  resetFeed();
  refreshBadge();
  refreshStreak();
  live();
}
function show(view) {
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${view}`;
  if (view === "notifications") loadNotifications();
  if (view === "leaderboards") loadBoards();
}
function postItem(p, isNew = false) {
  const likes = el("span", { class: "likes" }, String(p.like_count));
  const liked = { on: p.liked_by_me };
  const likeBtn = el("button", { class: "like", onclick: async () => {
    const path = { params: { path: { id: p.id, user: me } } };
    Rookery.check(await (liked.on ? rk.api.DELETE("/v1/posts/{id}/likes/{user}", path) : rk.api.PUT("/v1/posts/{id}/likes/{user}", path)));
    liked.on = !liked.on;
    likes.textContent = String(Number(likes.textContent) + (liked.on ? 1 : -1));
    likeBtn.textContent = liked.on ? "\u2665 Unlike" : "\u2661 Like";
  } }, liked.on ? "\u2665 Unlike" : "\u2661 Like");
  const comments = el("ul", { class: "comments" });
  const commentForm = el("form", { class: "comment-form", onsubmit: async (e) => {
    e.preventDefault();
    const input = commentForm.querySelector("input");
    const c = Rookery.check(await rk.api.POST("/v1/posts/{id}/comments", { params: { path: { id: p.id } }, body: { text: input.value } }));
    comments.append(el("li", {}, `${c.author.username}: ${c.text}`));
    input.value = "";
  } }, el("input", { placeholder: "comment", required: "" }), el("button", {}, "Reply"));
  const showComments = el("button", { onclick: async () => {
    comments.replaceChildren();
    for await (const c of rk.comments(p.id)) comments.append(el("li", {}, `${c.author.username}: ${c.text}`));
  } }, `\u{1F4AC} ${p.comment_count}`);
  return el(
    "li",
    { class: isNew ? "post new" : "post", "data-post": p.id, "data-author": p.author.id, "data-created": p.created_at },
    el(
      "div",
      { class: "meta" },
      el("a", { href: "#profile", onclick: () => openProfile(p.author.id) }, `@${p.author.username}`),
      ` \xB7 ${new Date(p.created_at).toLocaleString()}${p.visibility === "followers" ? " \xB7 followers" : ""}`
    ),
    el("div", { class: "text" }, p.text),
    el("div", { class: "actions" }, likeBtn, likes, showComments),
    comments,
    commentForm
  );
}
function resetFeed() {
  $("feed").replaceChildren();
  shown.clear();
  feedIter = rk.homeFeed(10)[Symbol.asyncIterator]();
  feedDone = false;
  $("feed-end").textContent = "";
  loadMoreFeed();
}
var feedEnd = new IntersectionObserver((entries) => {
  if (entries.at(-1).isIntersecting) loadMoreFeed();
}, { rootMargin: "0px 0px 200px 0px" });
async function loadMoreFeed() {
  if (feedLoading || feedDone) return;
  feedLoading = true;
  try {
    for (let i = 0; i < 10; i++) {
      const { value, done } = await feedIter.next();
      if (done) {
        feedDone = true;
        $("feed-end").textContent = "You have reached the first post.";
        break;
      }
      if (!shown.has(value.id)) {
        shown.add(value.id);
        $("feed").append(postItem(value));
      }
    }
  } catch (err) {
    feedDone = true;
    $("feed-end").textContent = `Could not load more (${err.message}); reload to try again.`;
  } finally {
    feedLoading = false;
    feedEnd.unobserve($("feed-end"));
    feedEnd.observe($("feed-end"));
  }
}
function placeInFeed(p) {
  const items = [...$("feed").children];
  const newer = (li) => li.dataset.created > p.created_at || li.dataset.created === p.created_at && li.dataset.post > p.id;
  const before = items.find((li) => !newer(li));
  if (!before && !feedDone && items.length > 0) return;
  shown.add(p.id);
  $("feed").insertBefore(postItem(p, true), before ?? null);
}
function removeFromFeed({ post_id, author_id }) {
  const items = post_id ? $("feed").querySelectorAll(`[data-post="${CSS.escape(post_id)}"]`) : $("feed").querySelectorAll(`[data-author="${CSS.escape(author_id)}"]`);
  for (const li of items) {
    shown.delete(li.dataset.post);
    li.remove();
  }
}
function updateInFeed(p) {
  for (const li of $("feed").querySelectorAll(`[data-post="${CSS.escape(p.id)}"]`)) {
    li.replaceWith(postItem(p, false));
  }
}
async function live() {
  const ctl = new AbortController();
  stopStream = () => ctl.abort();
  try {
    for await (const ev of rk.eventSource({ signal: ctl.signal })) {
      if (ev.type === "feed.post" && !shown.has(ev.data.post.id)) {
        placeInFeed(ev.data.post);
      } else if (ev.type === "feed.update") {
        updateInFeed(ev.data.post);
      } else if (ev.type === "feed.remove") {
        removeFromFeed(ev.data);
      } else if (ev.type === "notification") {
        setBadge(ev.data.unread_count);
      } else if (ev.type === "streak") {
        setStreak(ev.data);
      } else if (ev.type === "reset") {
        resetFeed();
        refreshBadge();
      }
    }
  } catch (err) {
    console.error("stream", err);
  }
}
function setBadge(n) {
  $("badge").textContent = String(n);
  $("badge").dataset.count = String(n);
}
async function refreshBadge() {
  setBadge(Rookery.check(await rk.api.GET("/v1/notifications/unread_count")).count);
}
function setStreak(s) {
  $("streak").textContent = `\u{1F525} ${s.current_streak} \xB7 ${s.total_points} pts`;
}
async function refreshStreak() {
  setStreak(Rookery.check(await rk.api.GET("/v1/users/{id}/streak", { params: { path: { id: me } } })));
}
async function loadNotifications() {
  const list = $("notifications");
  list.replaceChildren();
  for await (const n of rk.notifications({ limit: 50 })) {
    list.append(el("li", { class: n.read ? "read" : "unread" }, `${n.actor.username} \u2014 ${n.type}${n.post_id ? "" : ""}`));
    if (list.children.length >= 50) break;
  }
}
async function loadBoards() {
  const s = Rookery.check(await rk.api.GET("/v1/leaderboards/streaks", { params: { query: { limit: 10 } } }));
  $("board-streaks").replaceChildren(...s.items.map((r) => el("li", {}, `${r.user_id}: ${r.current_streak} days`)));
  const a = Rookery.check(await rk.api.GET("/v1/leaderboards/authors", { params: { query: { period: "day", limit: 10 } } }));
  $("board-authors").replaceChildren(...a.items.map((r) => el("li", {}, `${r.user_id}: ${r.score}`)));
}
async function openProfile(id) {
  show("profile");
  $("profile-user").value = id;
  const u = Rookery.check(await rk.api.GET("/v1/users/{id}", { params: { path: { id } } }));
  const rel = (method, kind, label) => el("button", { "data-action": label, onclick: async () => {
    Rookery.check(await rk.api[method](`/v1/users/{id}/${kind}/{target}`, { params: { path: { id: me, target: id } } }));
    await openProfile(id);
  } }, label);
  let follows = false;
  const f = await rk.api.GET("/v1/users/{id}/following/{target}", { params: { path: { id: me, target: id } } });
  follows = f.response.ok;
  $("profile").replaceChildren(
    el("h2", {}, `${u.display_name || u.username} (@${u.username})`),
    el("p", { class: "counts" }, `${u.follower_count} followers \xB7 ${u.following_count} following \xB7 ${u.post_count} posts`),
    id === me ? "" : el(
      "div",
      { class: "relations" },
      follows ? rel("DELETE", "following", "Unfollow") : rel("PUT", "following", "Follow"),
      rel("PUT", "mutes", "Mute"),
      rel("DELETE", "mutes", "Unmute"),
      rel("PUT", "blocks", "Block"),
      rel("DELETE", "blocks", "Unblock")
    )
  );
  const list = $("profile-posts");
  list.replaceChildren();
  for await (const p of rk.userPosts(id, 20)) {
    list.append(postItem(p));
    if (list.children.length >= 20) break;
  }
}
$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn($("signin-user").value).catch((err) => alert(err.message));
});
$("compose").addEventListener("submit", async (e) => {
  e.preventDefault();
  const body = { text: $("compose-text").value, visibility: $("compose-followers").checked ? "followers" : "public" };
  Rookery.check(await rk.api.POST("/v1/posts", { body }));
  $("compose-text").value = "";
  refreshStreak();
});
$("profile-form").addEventListener("submit", (e) => {
  e.preventDefault();
  openProfile($("profile-user").value);
});
$("mark-read").addEventListener("click", async () => {
  Rookery.check(await rk.api.POST("/v1/notifications/read", { body: { all: true } }));
  setBadge(0);
  loadNotifications();
});
for (const a of document.querySelectorAll("nav a")) a.addEventListener("click", () => show(a.dataset.view));
feedEnd.observe($("feed-end"));
window.addEventListener("beforeunload", () => stopStream?.());
