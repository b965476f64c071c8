// Package api is generated from docs/openapi.json by oapi-codegen (go generate; make test
// regenerates it and fails on a diff): a type per schema and a method per operation, named by its
// operationId. Package rookery (the module's root) wraps it with what a generator does not give.
package api

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../../docs/openapi.json
