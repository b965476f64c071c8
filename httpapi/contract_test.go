package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The contract check: every reply the HTTP tests receive (fixture.do) is validated against
// docs/openapi.json, its status, headers and body, so the document cannot say less or other than
// the server does (SDKs are generated from it).

var contract struct {
	once   sync.Once
	router routers.Router
	err    error
}

func contractRouter() (routers.Router, error) {
	contract.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile("../docs/openapi.json")
		if err != nil {
			contract.err = err
			return
		}
		doc.Servers = openapi3.Servers{{URL: "/"}} // any host
		// JSON lines (the data export): every line must be JSON; the first stands for the schema.
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			var first any
			dec := json.NewDecoder(body)
			for i := 0; ; i++ {
				var v any
				if err := dec.Decode(&v); err == io.EOF {
					return first, nil
				} else if err != nil {
					return nil, err
				}
				if i == 0 {
					first = v
				}
			}
		})
		contract.router, contract.err = gorillamux.NewRouter(doc)
	})
	return contract.router, contract.err
}

// checkContract validates one exchange; it reports what does not match the document.
func checkContract(t tb, req *http.Request, resp *http.Response, raw []byte) {
	t.Helper()
	router, err := contractRouter()
	if err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if req.URL.Path == "/metrics" || strings.HasPrefix(req.URL.Path, "/v1/stream") && req.Method == "GET" {
		return // text formats
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		if resp.StatusCode == 404 || resp.StatusCode == 405 {
			return // an unknown route: the server's 404/405
		}
		t.Fatalf("contract: %s %s has no operation in docs/openapi.json: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Fatalf("contract: %s %s answered %d, which docs/openapi.json does not describe: %v\nbody: %.300s", req.Method, req.URL.Path, resp.StatusCode, err, raw)
	}
}
