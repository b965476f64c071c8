// Package web is the demo web client (rookery serve --demo serves it at /demo/): a small app on the
// TypeScript SDK (sdk/ts) that shows Rookery working — sign in as any user, the home feed with
// infinite scroll and new posts arriving live, compose, like, comment, profiles (follow, block,
// mute), notifications with a live unread badge, the streak and points, both leaderboards.
// src/app.js is bundled with the SDK into dist/app.js by esbuild (npm run build here; make test
// rebuilds it and fails on a diff), and the files are embedded in the binary.
package web

import "embed"

// Files are the client's files: index.html, style.css, dist/app.js.
//
//go:embed index.html style.css dist/app.js
var Files embed.FS
