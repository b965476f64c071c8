package rookery_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// allowed lists, for every package of the module, the packages of the module it may import (its
// non-test files; tests may import anything). Imports point inward: cmd -> httpapi -> app ->
// rookery; backends import the domain and their engine only; only cmd imports backends. A new
// package must be added here, which makes its place in the layering a deliberate choice.
var allowed = map[string][]string{
	"":                        {},
	"internal/pebblekit":      {""},
	"internal/crashtest":      {},
	"internal/keylock":        {},
	"internal/cputime":        {},
	"internal/clocktest":      {},
	"internal/testenv":        {},
	"internal/testtable":      {"", "table", "table/pebble", "table/dynamo", "table/dynamo/dynamotest", "timeline/tablestore"},
	"internal/model":          {},
	"internal/progress":       {},
	"faults":                  {},
	"table":                   {""},
	"table/tabletest":         {"", "table", "internal/clocktest"},
	"table/pebble":            {"", "table", "internal/pebblekit", "internal/keylock"},
	"table/dynamo":            {"", "table", "internal/awsconf"},
	"table/dynamo/dynamotest": {"", "table", "table/dynamo", "internal/testenv"},
	"events":                  {"", "table"},
	"events/eventstest":       {"", "events", "internal/clocktest"},
	"events/embedded":         {"", "table", "events", "internal/pebblekit"},
	"events/nats":             {"", "events"},
	"events/sqs":              {"", "events", "internal/awsconf"},
	"events/ddbrelay":         {"", "events", "table"},
	"events/sqs/sqstest":      {"internal/testenv"},
	"timeline":                {""},
	"timeline/timelinetest":   {"", "timeline", "internal/clocktest"},
	"timeline/tablestore":     {"", "table", "timeline"},
	"timeline/redis":          {"", "timeline"},
	"timeline/pebblestore":    {"", "timeline", "internal/keylock", "internal/pebblekit"},
	"local":                   {"", "table/pebble", "events", "events/embedded", "timeline/pebblestore"},
	"auth":                    {""},
	"metrics":                 {""},
	"graph":                   {},
	"bench":                   {"graph", "internal/progress", "internal/sse"},
	"internal/sse":            {},
	"streak":                  {},
	"export":                  {""},
	"export/s3":               {"export", "internal/awsconf"},
	"internal/awsconf":        {},
	"cache":                   {""},
	"cache/cachetest":         {"", "cache", "internal/clocktest"},
	"cache/redis":             {"", "cache"},
	"ratelimit":               {""},
	"ratelimit/ratelimittest": {"ratelimit"},
	"ratelimit/redis":         {"", "ratelimit"},
	"app":                     {"", "table", "events", "timeline", "cache", "streak", "internal/keylock"},
	"live":                    {},
	"webhook":                 {"", "app"},
	"live/natsbus":            {"live"},
	"live/redisbus":           {"live"},
	"httpapi":                 {"", "app", "auth", "metrics", "events", "live", "ratelimit"},
	"web":                     {},
	"cmd/rookery":             {"*"},
}

func TestImportDirection(t *testing.T) {
	const module = "github.com/rookery/rookery"
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		rules, ok := allowed[rel]
		if !ok {
			t.Errorf("package %q has no rule in lint_test.go: add one", p.ImportPath)
			continue
		}
		if len(rules) == 1 && rules[0] == "*" {
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if !contains(rules, dep) {
				t.Errorf("%s imports %s; it may import only %v of this module", p.ImportPath, imp, sorted(rules))
			}
		}
	}
	if seen < len(allowed) {
		t.Errorf("go list saw %d packages; the rules name %d (remove rules of deleted packages)", seen, len(allowed))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sorted(l []string) []string {
	c := append([]string(nil), l...)
	sort.Strings(c)
	return c
}
