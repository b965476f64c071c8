package httpapi_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestFeedThroughRedisOutages runs the home feed on Redis timelines through two outages of Redis:
// one that keeps its data (its timelines come back stale: fan-out waited and fills them in) and
// one that loses it (its timelines come back missing: reads rebuild them). While Redis is down,
// reads pull and stay exactly right, and writes go on.
func TestFeedThroughRedisOutages(t *testing.T) {
	rs := startRedis(t)
	f, _ := newFixtureWith(t, fixtureConfig{timelines: "redis", redisAddr: rs.addr, celebrityThreshold: 2, timelineCap: 4})
	run := &modelRun{t: t, f: f, m: newFeedModel(modelPrefix())}
	run.register()
	act := func(op string, a, b int) { run.apply(feedAction{Op: op, A: a, B: b, Vis: "public", Limit: 5}) }
	for a := range modelUsers {
		for b := range modelUsers {
			if a != b && (a+b)%3 != 0 {
				act("follow", a, b)
			}
		}
	}
	writes := func(round int) {
		for i := range 3 * modelUsers {
			act("post", (i+round)%modelUsers, 0)
		}
		act("unfollow", round%modelUsers, (round+1)%modelUsers)
		act("mute", (round+2)%modelUsers, (round+3)%modelUsers)
		act("follow", (round+4)%modelUsers, (round+1)%modelUsers)
	}
	writes(0)
	for u := range modelUsers {
		act("read", u, 0) // every timeline exists
	}
	run.checkAll()

	for round, lose := range []bool{false, true} {
		rs.stop(t, !lose)
		writes(round + 1)
		for u := range modelUsers {
			act("read", u, 0)
		}
		run.checkFeeds() // Redis is down and fan-out is waiting: the reads pull, and are right
		rs.start(t)
		run.checkAll() // fan-out caught up, or the lost timelines were rebuilt
	}
}

// redisServer is a redis-server of the test's own, on a free port, that the test stops and starts.
type redisServer struct {
	addr, dir string
	cmd       *exec.Cmd
}

func startRedis(t *testing.T) *redisServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rs := &redisServer{addr: addr, dir: t.TempDir()}
	rs.start(t)
	t.Cleanup(func() { rs.stop(t, false) })
	return rs
}

func (rs *redisServer) start(t *testing.T) {
	t.Helper()
	_, port, _ := net.SplitHostPort(rs.addr)
	rs.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", rs.dir, "--save", "", "--appendonly", "no")
	if err := rs.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server (the tests need it installed): %v", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: rs.addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the server down, saving its data first if keep.
func (rs *redisServer) stop(t *testing.T, keep bool) {
	if rs.cmd == nil {
		return
	}
	c := goredis.NewClient(&goredis.Options{Addr: rs.addr})
	defer c.Close()
	how := "NOSAVE"
	if keep {
		how = "SAVE"
	}
	c.Do(context.Background(), "SHUTDOWN", how) // the connection closes: no reply
	if err := rs.cmd.Wait(); err != nil && !keep {
		t.Logf("redis-server exited: %v", err)
	}
	rs.cmd = nil
	if !keep {
		os.Remove(filepath.Join(rs.dir, "dump.rdb")) // a restart then starts empty
	}
}
