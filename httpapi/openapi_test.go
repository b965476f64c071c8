package httpapi_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// routePatterns returns the patterns ("GET /v1/feed") that routes.go registers.
func routePatterns(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`Handle(?:Func)?\("([A-Z]+ /[^"]*)"`).FindAllStringSubmatch(string(src), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestOpenAPIMatchesRoutes: docs/openapi.json describes exactly the routes that routes.go
// registers, and every operation documents its success replies and the problem reply.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile("../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Summary     string                     `json:"summary"`
			OperationID string                     `json:"operationId"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	var documented []string
	opIDs := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			if op.Summary == "" || op.Responses["default"] == nil || len(op.Responses) < 2 {
				t.Errorf("%s %s: needs a summary, its success replies and the default (problem) reply", method, path)
			}
			if other, dup := opIDs[op.OperationID]; op.OperationID == "" || dup {
				t.Errorf("%s %s: needs an operationId of its own (%q; also %s)", method, path, op.OperationID, other)
			}
			opIDs[op.OperationID] = method + " " + path
			if strings.HasPrefix(path, "/v1/") && (op.Responses["401"] == nil || op.Responses["429"] == nil) {
				t.Errorf("%s %s: every /v1 operation documents 401 and 429", method, path)
			}
		}
	}
	routes := routePatterns(t)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("docs/openapi.json documents %s, which routes.go does not register", d)
		}
	}
}
