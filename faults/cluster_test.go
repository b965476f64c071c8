package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The deployment under test: the scale-out of the README, every part a real process on ports of
// the test's own. DynamoDB Local, NATS and Redis are shared by the seeds of one run (each seed has
// its own table, stream prefix and key prefix); the Rookery processes are new for each seed.

// repoRoot is the module root, from this file's place.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// freePort returns a port nothing listens on now.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// waitTCP waits until addr accepts connections.
func waitTCP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer after %s: %v", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proc is a server process the test started and may kill, pause, resume and start again.
type proc struct {
	name string
	argv []string
	env  []string
	log  string // its output goes here (appended across restarts)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n=== %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s (%s): %v", p.name, p.argv[0], err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(sig)
	}
}

// stop ends the process with sig and waits for it to exit (SIGKILL after 10 s).
func (p *proc) stop(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot exit
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// exited reports whether the process was started and has exited since (a crash: stop forgets it).
func (p *proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// services are the servers the deployment needs: DynamoDB Local, NATS with JetStream, Redis.
type services struct {
	dynamo   *proc // started by scripts/dynamodb-local.sh; paused and resumed, never restarted
	dynamoEP string
	nats     *proc
	natsURL  string
	redis    *proc
	redisAdr string
	sqs      *proc // with -faults.events sqs: fauxqs, by scripts/sqs-local.sh; paused, never restarted
	sqsEP    string
}

// startServices starts the three servers on free ports, for the whole test. NATS is the server of
// the Go module go.mod names as a tool, built here, so the test runs the NATS it was written
// against (Debian's 2.9.10 crashed in its stream update handler after a restart).
func startServices(t *testing.T, dir string) *services {
	t.Helper()
	s := &services{}
	for _, bin := range []string{"redis-server", "java"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("the fault test needs %s on PATH (scripts/test.sh installs what is missing): %v", bin, err)
		}
	}
	natsServer := filepath.Join(dir, "nats-server")
	build := exec.Command("go", "build", "-o", natsServer, "github.com/nats-io/nats-server/v2")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nats-server: %v\n%s", err, out)
	}
	s.startDynamo(t)
	t.Cleanup(s.stopDynamo)

	if *eventsFlag == "sqs" {
		out, err := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "sqs-local.sh"), "start").Output()
		if err != nil {
			t.Fatalf("starting the SNS/SQS emulator: %v", err)
		}
		var pid int
		if _, err := fmt.Sscan(string(out), &s.sqsEP, &pid); err != nil {
			t.Fatalf("sqs-local.sh start printed %q", out)
		}
		sp, _ := os.FindProcess(pid)
		s.sqs = &proc{name: "fauxqs", cmd: &exec.Cmd{Process: sp}}
		t.Cleanup(func() {
			sp.Signal(syscall.SIGCONT)
			exec.Command("bash", filepath.Join(repoRoot(), "scripts", "sqs-local.sh"), "stop", fmt.Sprint(pid)).Run()
		})
	}

	natsPort := freePort(t)
	s.natsURL = "nats://127.0.0.1:" + natsPort
	s.nats = &proc{name: "nats-server", log: filepath.Join(dir, "nats.log"),
		argv: []string{natsServer, "-a", "127.0.0.1", "-p", natsPort, "-js", "-sd", filepath.Join(dir, "nats")}}
	s.nats.start(t)
	t.Cleanup(func() { s.nats.stop(syscall.SIGTERM) })
	if err := waitTCP("127.0.0.1:"+natsPort, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	redisPort := freePort(t)
	s.redisAdr = "127.0.0.1:" + redisPort
	s.redis = &proc{name: "redis-server", log: filepath.Join(dir, "redis.log"),
		argv: []string{"redis-server", "--port", redisPort, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}}
	s.redis.start(t)
	t.Cleanup(func() { s.redis.stop(syscall.SIGKILL) })
	if err := waitTCP(s.redisAdr, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

// startDynamo starts DynamoDB Local, through the script that installs and starts it (it prints
// "ENDPOINT PID").
func (s *services) startDynamo(t testing.TB) {
	out, err := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "dynamodb-local.sh"), "start").Output()
	if err != nil {
		t.Fatalf("starting DynamoDB Local: %v", err)
	}
	var pid int
	if _, err := fmt.Sscan(string(out), &s.dynamoEP, &pid); err != nil {
		t.Fatalf("dynamodb-local.sh start printed %q", out)
	}
	dp, _ := os.FindProcess(pid)
	s.dynamo = &proc{name: "dynamodb-local", cmd: &exec.Cmd{Process: dp}}
}

func (s *services) stopDynamo() {
	p := s.dynamo.cmd.Process
	p.Signal(syscall.SIGCONT)
	exec.Command("bash", filepath.Join(repoRoot(), "scripts", "dynamodb-local.sh"), "stop", fmt.Sprint(p.Pid)).Run()
}

// freshDynamo replaces DynamoDB Local with a new one, for the next seed: DynamoDB Local slows down
// as the records of its tables' streams pile up (the workers relay the outbox from the stream), and
// a seed's deployment is timed as if it ran alone.
func (s *services) freshDynamo(t testing.TB) {
	s.stopDynamo()
	s.startDynamo(t)
}

// revive starts again whichever of NATS and Redis crashed (exited without the test stopping it),
// and names them: a seed during which one crashed says nothing about Rookery.
func (s *services) revive(t testing.TB) []string {
	var crashed []string
	for _, p := range []*proc{s.nats, s.redis} {
		if p.exited() {
			crashed = append(crashed, p.name)
			p.stop(syscall.SIGKILL)
			p.start(t)
		}
	}
	if len(crashed) > 0 {
		waitTCP(strings.TrimPrefix(s.natsURL, "nats://"), 10*time.Second)
		waitTCP(s.redisAdr, 10*time.Second)
	}
	return crashed
}

// restartRedisEmpty kills Redis and starts it again with nothing: every timeline is gone.
func (s *services) restartRedisEmpty(t testing.TB, down time.Duration) {
	s.redis.stop(syscall.SIGKILL)
	time.Sleep(down)
	s.redis.start(t)
	if err := waitTCP(s.redisAdr, 10*time.Second); err != nil {
		t.Error(err)
	}
}

// restartNATS stops NATS (SIGTERM: JetStream's file store is flushed) and starts it again on the
// same store.
func (s *services) restartNATS(t testing.TB, down time.Duration) {
	s.nats.stop(syscall.SIGTERM)
	time.Sleep(down)
	s.nats.start(t)
	if err := waitTCP(strings.TrimPrefix(s.natsURL, "nats://"), 10*time.Second); err != nil {
		t.Error(err)
	}
}

// keepLogs copies the logs under dir (the processes' and the seed's) to a directory the test does
// not remove, and names it: a failed seed's logs outlive its temporary directory.
func keepLogs(t testing.TB, dir string) {
	kept, err := os.MkdirTemp("", "rookery-faults-")
	if err != nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range logs {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(kept, filepath.Base(f)), b, 0o644)
		}
	}
	t.Logf("the logs are kept in %s", kept)
}

// pause stops p (SIGSTOP) for d, then resumes it.
func pause(p *proc, d time.Duration) {
	p.signal(syscall.SIGSTOP)
	time.Sleep(d)
	p.signal(syscall.SIGCONT)
}

// buildBinary builds cmd/rookery once per test run (or takes ROOKERY_FAULT_BINARY, to run the
// test against another build, such as an older commit's).
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv("ROOKERY_FAULT_BINARY"); bin != "" {
		return bin
	}
	bin := filepath.Join(dir, "rookery")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rookery")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// node is one Rookery process.
type node struct {
	*proc
	url string
}

// deployment is one seed's Rookery: its configuration and its processes.
type deployment struct {
	bin     string
	env     []string
	apis    []*node
	workers []*node
}

// startDeployment migrates a new table and starts apis API processes and workers worker processes,
// with the environment extra besides the deployment's own.
func startDeployment(t *testing.T, bin, dir string, s *services, tag string, apis, workers int, extra ...string) *deployment {
	t.Helper()
	d := &deployment{bin: bin, env: []string{
		"ROOKERY_STORE=dynamo", "ROOKERY_DYNAMO_ENDPOINT=" + s.dynamoEP, "ROOKERY_DYNAMO_TABLE=" + tag,
		"ROOKERY_DYNAMO_REGION=us-east-1", "ROOKERY_AWS_ACCESS_KEY_ID=test", "ROOKERY_AWS_SECRET_ACCESS_KEY=test",
		"ROOKERY_AUTH_SECRET=" + string(secret),
		"ROOKERY_NATS_URL=" + s.natsURL, "ROOKERY_NATS_PREFIX=" + tag, "ROOKERY_EVENT_PARTITIONS=2",
		"ROOKERY_NATS_LEASE_TTL=2s",
		"ROOKERY_TIMELINES=redis", "ROOKERY_CACHE=redis", "ROOKERY_REDIS_ADDR=" + s.redisAdr, "ROOKERY_REDIS_PREFIX=" + tag,
		"ROOKERY_LOG_LEVEL=" + *logLevelFlag,
		// The checks page every feed to its end, again and again while the deployment drains: far
		// past what the rate limits allow one user (cmd's TestRateLimitsEndToEnd tests those).
		"ROOKERY_RATE_READ=off", "ROOKERY_RATE_WRITE=off", "ROOKERY_RATE_EXPENSIVE=off",
	}}
	if s.sqs != nil {
		// A prefix of at most 20 characters; a long poll of 1 s, so that a stopped process lets go
		// of its messages soon; batches of 9 (fauxqs reorders a batch of 10: sqs.Options.PublishBatch).
		d.env = append(d.env, "ROOKERY_EVENTS=sqs", "ROOKERY_SQS_ENDPOINT="+s.sqsEP, "ROOKERY_SQS_REGION=us-east-1",
			"ROOKERY_SQS_PREFIX="+sqsPrefix(tag), "ROOKERY_SQS_WAIT=1s", "ROOKERY_SNS_PUBLISH_BATCH=9")
	} else {
		d.env = append(d.env, "ROOKERY_EVENTS=nats")
	}
	d.env = append(d.env, extra...)
	migrate := exec.Command(bin, "migrate")
	migrate.Env = append(os.Environ(), d.env...)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("rookery migrate: %v\n%s", err, out)
	}
	for i := range apis + workers {
		role, name := "api", fmt.Sprintf("api%d", i)
		if i >= apis {
			role, name = "worker", fmt.Sprintf("worker%d", i-apis)
		}
		addr := "127.0.0.1:" + freePort(t)
		n := &node{url: "http://" + addr, proc: &proc{name: name, log: filepath.Join(dir, name+".log"), env: d.env,
			argv: []string{bin, "serve", "--role", role, "--addr", addr, "--data-dir", filepath.Join(dir, name)}}}
		if role == "api" {
			d.apis = append(d.apis, n)
		} else {
			d.workers = append(d.workers, n)
		}
		n.start(t)
	}
	t.Cleanup(func() {
		for _, n := range d.all() {
			n.stop(syscall.SIGTERM)
		}
	})
	for _, n := range d.all() {
		if err := n.waitReady(30 * time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", n.name, err, n.tail(30))
		}
	}
	return d
}

// sqsPrefix shortens a deployment's tag to a prefix SQS's queue names leave room for.
func sqsPrefix(tag string) string {
	if len(tag) <= 20 {
		return tag
	}
	return "f" + tag[len(tag)-19:]
}

func (d *deployment) all() []*node { return append(append([]*node{}, d.apis...), d.workers...) }

// waitReady waits until the node answers /healthz.
func (n *node) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(n.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %s: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the node with SIGKILL and starts it again after down, on the same address and
// data directory.
func (n *node) kill(t testing.TB, down time.Duration) {
	n.stop(syscall.SIGKILL)
	time.Sleep(down)
	n.start(t)
	if err := n.waitReady(30 * time.Second); err != nil {
		t.Errorf("%s after a restart: %v", n.name, err)
	}
}

// metric sums the samples of a Prometheus metric (with the given label filter) on the node's
// /metrics; ok is false when the node did not answer.
func (n *node) metric(ctx context.Context, name, filter string) (sum float64, ok bool) {
	req, _ := http.NewRequestWithContext(ctx, "GET", n.url+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, filter) {
			continue
		}
		var v float64
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			fmt.Sscan(line[i+1:], &v)
		}
		sum += v
	}
	return sum, true
}
