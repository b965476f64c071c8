package app

import (
	"strings"

	"github.com/rookery/rookery/table"
)

// The key schema: every item Rookery stores, its keys, and the one Get or Query that serves each
// access pattern. This file is the only place that spells a key. Separators: '#' joins key parts;
// ids that reach a key are validated first, so none contains a '#'.
//
//	entity          PK                  SK       attributes (besides the keys)
//	User            USER#<id>           META     id, username, display_name, bio, timezone,
//	                                             created_at, version, *_count
//	Username claim  USERNAME#<lower>    META     user_id  (unique usernames: conditional put)
//
//	access pattern                      served by
//	FEED-001 get user by id             Get(USER#<id>, META)
//	get user by username                Get(USERNAME#<lower>, META) -> Get(USER#<id>, META)
//	username is taken?                  the conditional put of the claim (NotExists), never a read
//
// Secondary indexes (every index the schema uses; `rookery migrate` creates them all). The
// entities that fill GSI1..GSI4 are added with the social core and timelines (issues 4 and 5):
//
//	GSI1  GSI1PK/GSI1SK  posts by author  USER#<author> / <ts>#POST#<id>   (FEED-002, AP2)
//	GSI2  GSI2PK/GSI2SK  posts by tag     TAG#<tag>     / <ts>#POST#<id>   (FEED-007)
//	GSI3  GSI3PK/GSI3SK  followers        FOLLOWEE#<id> / <ts>#FOLLOWER#<id> (FEED-008, AP5)
//	GSI4  GSI4PK/GSI4SK  timelines by post POST#<id>    / FEED#<user>      (seed 004 delete-by-post)
var Schema = table.Schema{Indexes: []table.Index{
	{Name: "GSI1", PK: "GSI1PK", SK: "GSI1SK"},
	{Name: "GSI2", PK: "GSI2PK", SK: "GSI2SK"},
	{Name: "GSI3", PK: "GSI3PK", SK: "GSI3SK"},
	{Name: "GSI4", PK: "GSI4PK", SK: "GSI4SK"},
}}

const skMeta = "META"

func userKey(id string) table.Key { return table.Key{PK: "USER#" + id, SK: skMeta} }

func usernameKey(username string) table.Key {
	return table.Key{PK: "USERNAME#" + strings.ToLower(username), SK: skMeta}
}
