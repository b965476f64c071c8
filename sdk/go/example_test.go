package rookery_test

import (
	"context"
	"fmt"
	"log"
	"time"

	rookery "github.com/rookery/rookery/sdk/go"
	"github.com/rookery/rookery/sdk/go/api"
)

// An app's backend mints a token for its signed-in user; the user's client reads the home feed,
// page after page, with the iterator.
func Example() {
	secret := []byte("the server's --auth-secret, 32 bytes or more")
	tok, err := rookery.MintUserToken(secret, "alice", time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	c, err := rookery.New("http://127.0.0.1:8080", rookery.WithToken(tok))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.CreatePostWithResponse(ctx, nil, api.PostInput{Text: "Hello #rookery"})
	if err = rookery.Check(p.HTTPResponse, p.Body, err); err != nil {
		log.Fatal(err)
	}
	for post, err := range c.HomeFeed(ctx, 50) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(post.Author.Username, post.Text)
	}
}

// A server token acts for any user (X-On-Behalf-Of).
func ExampleActingAs() {
	tok, _ := rookery.MintServerToken([]byte("the server's --auth-secret, 32 bytes or more"), "my-app", time.Hour)
	c, _ := rookery.New("http://127.0.0.1:8080", rookery.WithToken(tok))
	ctx := rookery.ActingAs(context.Background(), "bob")
	_, _ = c.FollowUserWithResponse(ctx, "bob", "alice")
}

// The live stream, resumed across dropped connections: keep the last id to resume after a restart.
func ExampleClient_Stream() {
	c, _ := rookery.New("http://127.0.0.1:8080", rookery.WithToken("a user's token"))
	last := ""
	for ev, err := range c.Stream(context.Background(), last) {
		if err != nil {
			log.Fatal(err)
		}
		last = ev.ID
		if ev.Type == "feed.post" {
			var fp api.FeedPostEvent
			_ = ev.Decode(&fp)
			fmt.Println("new post", fp.Post.Id)
		}
	}
}
