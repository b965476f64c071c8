// The demo web client: plain DOM on the TypeScript SDK. Every list pages through the SDK's
// iterators; the live stream (resumed by the SDK across dropped connections) brings new posts and
// notifications in without a reload.
import { Rookery } from "@rookery/sdk";

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
};

let rk, me, feedIter, feedLoading = false, feedDone = false, stopStream;
const shown = new Set();

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
    likeBtn.textContent = liked.on ? "♥ Unlike" : "♡ Like";
  } }, liked.on ? "♥ Unlike" : "♡ Like");
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
  } }, `💬 ${p.comment_count}`);
  return el("li", { class: isNew ? "post new" : "post", "data-post": p.id, "data-author": p.author.id, "data-created": p.created_at },
    el("div", { class: "meta" }, el("a", { href: "#profile", onclick: () => openProfile(p.author.id) }, `@${p.author.username}`),
      ` · ${new Date(p.created_at).toLocaleString()}${p.visibility === "followers" ? " · followers" : ""}`),
    el("div", { class: "text" }, p.text),
    el("div", { class: "actions" }, likeBtn, likes, showComments),
    comments, commentForm);
}

function resetFeed() {
  $("feed").replaceChildren();
  shown.clear();
  feedIter = rk.homeFeed(10)[Symbol.asyncIterator]();
  feedDone = false;
  $("feed-end").textContent = "";
  loadMoreFeed();
}

// The feed's end, watched: in sight (or within 200px of it), it loads the next page. The observer
// reports only changes, so a page that comes into sight while another loads (the call below returns
// at once) would be lost if the end stayed in sight; each load therefore observes the end again when
// it is done, which makes the observer report the end's state afresh at the next frame.
const feedEnd = new IntersectionObserver((entries) => {
  if (entries.at(-1).isIntersecting) loadMoreFeed();
}, { rootMargin: "0px 0px 200px 0px" });

async function loadMoreFeed() {
  if (feedLoading || feedDone) return;
  feedLoading = true;
  try {
    for (let i = 0; i < 10; i++) {
      const { value, done } = await feedIter.next();
      if (done) { feedDone = true; $("feed-end").textContent = "You have reached the first post."; break; }
      if (!shown.has(value.id)) { shown.add(value.id); $("feed").append(postItem(value)); }
    }
  } catch (err) {
    // The SDK's iterator ends with its error: say so, rather than that the feed ended.
    feedDone = true;
    $("feed-end").textContent = `Could not load more (${err.message}); reload to try again.`;
  } finally {
    feedLoading = false;
    feedEnd.unobserve($("feed-end"));
    feedEnd.observe($("feed-end"));
  }
}

// A post from the stream goes where the feed orders it (newest first: by created_at, then id), not
// always on top: a follow brings the author's recent posts, older than some already shown. One older
// than every post shown while pages are left is not shown: paging brings it. (Into an empty feed it
// goes at once: the first page may have been read before it was made.)
function placeInFeed(p) {
  const items = [...$("feed").children];
  const newer = (li) => li.dataset.created > p.created_at || (li.dataset.created === p.created_at && li.dataset.post > p.id);
  const before = items.find((li) => !newer(li));
  if (!before && !feedDone && items.length > 0) return;
  shown.add(p.id);
  $("feed").insertBefore(postItem(p, true), before ?? null);
}

// feed.remove names a deleted post, or an author whose posts all left the feed (unfollowed, blocked,
// muted); those may come back (a follow again), so they are forgotten as shown.
function removeFromFeed({ post_id, author_id }) {
  const items = post_id ? $("feed").querySelectorAll(`[data-post="${CSS.escape(post_id)}"]`)
    : $("feed").querySelectorAll(`[data-author="${CSS.escape(author_id)}"]`);
  for (const li of items) {
    shown.delete(li.dataset.post);
    li.remove();
  }
}

// feed.update brings an edited post: shown, it is drawn again in its place.
function updateInFeed(p) {
  for (const li of $("feed").querySelectorAll(`[data-post="${CSS.escape(p.id)}"]`)) {
    li.replaceWith(postItem(p, false));
  }
}

async function live() {
  const ctl = new AbortController();
  stopStream = () => ctl.abort();
  try {
    // A browser's EventSource, opened with single-use stream tickets (no token in a URL).
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

function setBadge(n) { $("badge").textContent = String(n); $("badge").dataset.count = String(n); }
async function refreshBadge() { setBadge(Rookery.check(await rk.api.GET("/v1/notifications/unread_count")).count); }
function setStreak(s) { $("streak").textContent = `🔥 ${s.current_streak} · ${s.total_points} pts`; }
async function refreshStreak() { setStreak(Rookery.check(await rk.api.GET("/v1/users/{id}/streak", { params: { path: { id: me } } }))); }

async function loadNotifications() {
  const list = $("notifications");
  list.replaceChildren();
  for await (const n of rk.notifications({ limit: 50 })) {
    list.append(el("li", { class: n.read ? "read" : "unread" }, `${n.actor.username} — ${n.type}${n.post_id ? "" : ""}`));
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
    el("p", { class: "counts" }, `${u.follower_count} followers · ${u.following_count} following · ${u.post_count} posts`),
    id === me ? "" : el("div", { class: "relations" },
      follows ? rel("DELETE", "following", "Unfollow") : rel("PUT", "following", "Follow"),
      rel("PUT", "mutes", "Mute"), rel("DELETE", "mutes", "Unmute"),
      rel("PUT", "blocks", "Block"), rel("DELETE", "blocks", "Unblock")));
  const list = $("profile-posts");
  list.replaceChildren();
  for await (const p of rk.userPosts(id, 20)) {
    list.append(postItem(p));
    if (list.children.length >= 20) break;
  }
}

$("signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("signin-user").value).catch((err) => alert(err.message)); });
$("compose").addEventListener("submit", async (e) => {
  e.preventDefault();
  const body = { text: $("compose-text").value, visibility: $("compose-followers").checked ? "followers" : "public" };
  Rookery.check(await rk.api.POST("/v1/posts", { body }));
  $("compose-text").value = "";
  refreshStreak();
});
$("profile-form").addEventListener("submit", (e) => { e.preventDefault(); openProfile($("profile-user").value); });
$("mark-read").addEventListener("click", async () => {
  Rookery.check(await rk.api.POST("/v1/notifications/read", { body: { all: true } }));
  setBadge(0);
  loadNotifications();
});
for (const a of document.querySelectorAll("nav a")) a.addEventListener("click", () => show(a.dataset.view));
feedEnd.observe($("feed-end"));
window.addEventListener("beforeunload", () => stopStream?.());
