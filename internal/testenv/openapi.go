package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"smsgw/api/openapi"
)

type contract struct {
	doc    *openapi3.T
	router routers.Router
}

// loadContract parses and validates api/openapi/openapi.json once. The
// document's server URL is dropped so that routes match whatever address a
// test server listens on.
var loadContract = sync.OnceValues(func() (*contract, error) {
	// The console's page is HTML: its schema is a string.
	openapi3filter.RegisterBodyDecoder("text/html", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.JSON)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contract{doc: doc, router: router}, nil
})

// CheckContract fails the test when a response disagrees with the OpenAPI
// document: its status, headers or body. A response to a path the document
// does not have must be the error envelope (an unknown route's 404, a
// wrong method's 405); the console's pages below /console/ are HTML and not
// part of the API.
func CheckContract(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if strings.HasPrefix(req.URL.Path, "/console/") {
		return
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.Errorf("openapi.json has no route for %s %s, which answered %d", req.Method, req.URL.Path, status)
			return
		}
		ref := c.doc.Components.Schemas["Error"]
		var v any
		if err := jsonUnmarshal(body, &v); err != nil {
			t.Errorf("%s %s answered %d without the error envelope: %s", req.Method, req.URL.Path, status, body)
			return
		}
		if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s %s answered %d without the error envelope: %v", req.Method, req.URL.Path, status, err)
		}
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s answered %d, which openapi.json does not allow: %v\nbody: %.500s", req.Method, req.URL.Path, status, err, body)
	}
	checkListedHeaders(t, req, route.Operation, status, header)
}

// serviceHeaders are the headers of smsgw's own that a client acts on; the
// document lists each one for every response that carries it. (Generic
// ones, Content-Type, Vary, Date, are not listed.)
var serviceHeaders = []string{"X-Request-ID", "Retry-After", "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit",
	"X-RateLimit-Remaining", "X-RateLimit-Reset", "Idempotent-Replayed", "WWW-Authenticate",
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers",
	"Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age"}

// checkListedHeaders fails the test when a response carries one of the
// service's headers that the document does not list for that response.
func checkListedHeaders(t testing.TB, req *http.Request, op *openapi3.Operation, status int, header http.Header) {
	t.Helper()
	ref := op.Responses.Status(status)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return
	}
	for _, h := range serviceHeaders {
		if header.Get(h) == "" {
			continue
		}
		listed := false
		for name := range ref.Value.Headers {
			if strings.EqualFold(name, h) {
				listed = true
				break
			}
		}
		if !listed {
			t.Errorf("%s %s answered %d with %s, which openapi.json does not list for that response", req.Method, req.URL.Path, status, h)
		}
	}
}
