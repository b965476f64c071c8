package redisbus_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/live"
	"github.com/rookery/rookery/live/redisbus"
)

// Two processes' buses on one Redis: an event published by one reaches a stream open on the other,
// and none reaches a user without a stream there.
func TestAcrossProcesses(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	defer rdb.Close()
	prefix := fmt.Sprintf("rookerytest-bus-%d-%d", os.Getpid(), time.Now().UnixNano())
	hubA, hubB := &live.Hub{}, &live.Hub{}
	a := redisbus.Open(rdb, redisbus.Options{Prefix: prefix}, hubA)
	defer a.Close()
	b := redisbus.Open(rdb, redisbus.Options{Prefix: prefix}, hubB)
	defer b.Close()

	s := hubB.Subscribe("alice", 8) // subscribed once Subscribe returns (watch waits for Redis)
	defer s.Close()
	other := hubA.Subscribe("bob", 8)
	defer other.Close()
	a.Publish("alice", 7, "feed.post", []byte(`{"x":1}`))
	select {
	case m := <-s.C:
		if m.Seq != 7 || m.Type != "feed.post" || string(m.Data) != `{"x":1}` {
			t.Fatalf("got %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event did not reach the other process's stream")
	}
	select {
	case m := <-other.C:
		t.Fatalf("bob's stream got %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
}
