package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// loadOpenAPI returns the embedded document, parsed.
func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	return doc
}

// obj returns v[key] as an object, failing the test when it is not one.
func obj(t *testing.T, v any, where string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: want an object, got %T", where, v)
	}
	return m
}

// operations returns the document's operations as "METHOD /path" → operation.
func operations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	ops := make(map[string]map[string]any)
	for path, item := range obj(t, doc["paths"], "paths") {
		for method, op := range obj(t, item, path) {
			if slices.Contains(openAPIMethods, method) {
				ops[strings.ToUpper(method)+" "+path] = obj(t, op, method+" "+path)
			}
		}
	}
	return ops
}

// resolvePointer follows a local JSON pointer ("#/a/b~1c") within doc.
func resolvePointer(doc any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, errors.New("not a reference within the document")
	}
	cur := doc
	if rest == "" {
		return cur, nil
	}
	if !strings.HasPrefix(rest, "/") {
		return nil, errors.New("not a JSON pointer")
	}
	for _, tok := range strings.Split(rest[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, errors.New("no " + strconv.Quote(tok))
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, errors.New("no index " + strconv.Quote(tok))
			}
			cur = c[i]
		default:
			return nil, errors.New("cannot descend into a scalar at " + strconv.Quote(tok))
		}
	}
	return cur, nil
}

// deref follows v's $ref, if it has one.
func deref(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m := obj(t, v, "deref")
	if ref, ok := m["$ref"].(string); ok {
		target, err := resolvePointer(doc, ref)
		if err != nil {
			t.Fatalf("$ref %s: %v", ref, err)
		}
		return obj(t, target, ref)
	}
	return m
}

func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	if got := doc["openapi"]; got != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", got)
	}
	info := obj(t, doc["info"], "info")
	if d, _ := info["description"].(string); !strings.Contains(d, "trailing slash") {
		t.Errorf("info.description does not say that paths with and without the trailing slash are served alike")
	}
	ops := operations(t, doc)
	if len(ops) == 0 {
		t.Fatal("no operations")
	}
	for name, op := range ops {
		if r, ok := op["responses"].(map[string]any); !ok || len(r) == 0 {
			t.Errorf("%s: no responses", name)
		}
	}

	// Every $ref resolves within the document.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"]; ok {
				s, _ := ref.(string)
				if _, err := resolvePointer(doc, s); err != nil {
					t.Errorf("%s: $ref %q does not resolve: %v", at, s, err)
				}
			}
			for k, e := range v {
				walk(e, at+"/"+k)
			}
		case []any:
			for i, e := range v {
				walk(e, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")
}

// errorStatuses maps every code the server answers with to its status, from
// respond.go's own errors.
func errorStatuses(t *testing.T) map[string]int {
	t.Helper()
	all := []error{
		invalidRequest("x"), errInvalidCredentials, errNotAuthenticated, errInvalidToken,
		errPermissionDenied, errNotFound, methodNotAllowed("GET"), errTooLarge,
		errUnsupportedMedia, throttled(1, "pair"), errUnavailable, errInternal, weakPasswordReply(nil),
		errMFAEnrolled, mfaRequired("x"), errInsufficientScope, errTokenNameTaken, errTooManyTokens,
		errCodeMissing, errIntrospectMedia, errEnrollmentRequired, errUserExists, errSelf, errResetOfDisabled,
	}
	statuses := make(map[string]int)
	for _, err := range all {
		var e *apiError
		if !errors.As(err, &e) {
			t.Fatalf("%v is not an apiError", err)
		}
		if s, ok := statuses[e.code]; ok && s != e.status {
			t.Fatalf("code %q is answered with %d and %d", e.code, s, e.status)
		}
		statuses[e.code] = e.status
	}
	return statuses
}

// errorCodes returns the codes a response's schema allows, or nil when it
// is not an error body.
func errorCodes(t *testing.T, doc, response map[string]any) []string {
	t.Helper()
	content, _ := response["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	schema, _ := media["schema"].(map[string]any)
	if schema == nil {
		return nil
	}
	if ref, _ := schema["$ref"].(string); ref == "#/components/schemas/Error" {
		schema = deref(t, doc, schema)
	} else {
		all, _ := schema["allOf"].([]any)
		isError := false
		for _, s := range all {
			if m, _ := s.(map[string]any); m["$ref"] == "#/components/schemas/Error" {
				isError = true
			}
		}
		if !isError {
			return nil
		}
	}
	props, _ := schema["properties"].(map[string]any)
	code, _ := props["code"].(map[string]any)
	if c, ok := code["const"].(string); ok {
		return []string{c}
	}
	var codes []string
	enum, _ := code["enum"].([]any)
	for _, c := range enum {
		s, _ := c.(string)
		codes = append(codes, s)
	}
	return codes
}

// resetConfirmOp is the one operation whose invalid_token is a 400, as
// API.md gives it (djoser's): a reset link is a field of the body, not a
// credential, so no 401 and no WWW-Authenticate.
const resetConfirmOp = "POST /api/auth/password/reset/confirm/"

func TestOpenAPIErrors(t *testing.T) {
	doc := loadOpenAPI(t)
	statuses := errorStatuses(t)

	// The Error schema's code enum is exactly the server's codes.
	errSchema := obj(t, obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")["Error"], "Error")
	var enum []string
	codeSchema := obj(t, obj(t, errSchema["properties"], "Error.properties")["code"], "Error.code")
	for _, c := range codeSchema["enum"].([]any) {
		s, _ := c.(string)
		enum = append(enum, s)
	}
	var want []string
	for code := range statuses {
		want = append(want, code)
	}
	sort.Strings(want)
	sort.Strings(enum)
	if !slices.Equal(enum, want) {
		t.Errorf("Error.code enum = %v, want %v", enum, want)
	}

	for name, op := range operations(t, doc) {
		for status, v := range obj(t, op["responses"], name+" responses") {
			resp := deref(t, doc, v)
			n, err := strconv.Atoi(status)
			if err != nil {
				t.Errorf("%s: response %q is not a status", name, status)
				continue
			}
			headers, _ := resp["headers"].(map[string]any)
			codes := errorCodes(t, doc, resp)
			if n >= 400 && len(codes) == 0 {
				t.Errorf("%s %d: not an Error body with codes", name, n)
			}
			for _, c := range codes {
				if !slices.Contains(enum, c) {
					t.Errorf("%s %d: code %q is not in Error.code's enum", name, n, c)
				} else if statuses[c] != n && !(name == resetConfirmOp && c == errBadResetLink.code && n == errBadResetLink.status) {
					t.Errorf("%s %d: code %q is answered with %d", name, n, c, statuses[c])
				}
			}
			wantHeader := map[int]string{401: "WWW-Authenticate", 405: "Allow", 429: "Retry-After", 503: "Retry-After"}[n]
			if wantHeader != "" && headers[wantHeader] == nil {
				t.Errorf("%s %d: no %s header", name, n, wantHeader)
			}
		}
	}

	// Replies that must not be cached, or that vary with the token.
	ops := operations(t, doc)
	for name, want := range map[string][]string{
		"POST /api/auth/login/": {"Cache-Control"},
		"GET /api/auth/info":    {"Cache-Control", "Vary"},
	} {
		op, ok := ops[name]
		if !ok {
			t.Errorf("%s: not documented", name)
			continue
		}
		ok200 := deref(t, doc, obj(t, op["responses"], name)["200"])
		headers, _ := ok200["headers"].(map[string]any)
		for _, h := range want {
			if headers[h] == nil {
				t.Errorf("%s 200: no %s header", name, h)
			}
		}
	}
}

// TestOpenAPILoginReply checks the documented token pattern against real tokens.
func TestOpenAPILoginReply(t *testing.T) {
	doc := loadOpenAPI(t)
	reply := obj(t, obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")["LoginReply"], "LoginReply")
	token := obj(t, obj(t, reply["properties"], "properties")["token"], "token")
	pattern, _ := token["pattern"].(string)
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("token pattern %q: %v", pattern, err)
	}
	for range 20 {
		if tok, _ := tokens.New(); !re.MatchString(tok) {
			t.Fatalf("token %q does not match %q", tok, pattern)
		}
	}
}

// TestOpenAPIAccessTokens checks the documented personal access token
// against real ones, and the documented examples against the format.
func TestOpenAPIAccessTokens(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")
	created := obj(t, schemas["AccessTokenCreated"], "AccessTokenCreated")
	token := obj(t, obj(t, created["properties"], "properties")["token"], "token")
	re, err := regexp.Compile(token["pattern"].(string))
	if err != nil {
		t.Fatalf("token pattern: %v", err)
	}
	for range 20 {
		if tok, _ := tokens.NewPAT(); !re.MatchString(tok) {
			t.Fatalf("token %q does not match %q", tok, re)
		}
	}
	// Every example token has a matching checksum: one copied from the
	// document into a test client is a well-formed (unknown) token.
	examples := regexp.MustCompile(`authsvc_pat_[0-9A-Za-z]+`).FindAll(openAPIDoc, -1)
	if len(examples) == 0 {
		t.Error("openapi.json shows no example personal access token")
	}
	for _, ex := range examples {
		// A listing's prefix is shorter than a token: only tokens count.
		if s := string(ex); len(s) > tokens.PATShownPrefix && !tokens.ValidPAT(s) {
			t.Errorf("example token %q is not a valid personal access token", s)
		}
	}
	item := obj(t, obj(t, schemas["AccessToken"], "AccessToken")["properties"], "AccessToken.properties")
	if _, ok := item["token"]; ok {
		t.Error("AccessToken (the listing's item) has a token property; only the create reply carries it")
	}
	prefix := obj(t, item["prefix"], "prefix")
	tok, _ := tokens.NewPAT()
	if re := regexp.MustCompile(prefix["pattern"].(string)); !re.MatchString(tok[:tokens.PATShownPrefix]) {
		t.Errorf("prefix pattern %q does not match %q", re, tok[:tokens.PATShownPrefix])
	}
}

// TestOpenAPIInsufficientScope: every operation that takes a token
// documents the 403 insufficient_scope a personal access token gets where
// its scopes do not reach (API.md: every endpoint but those its scopes
// name), and the caller's scope at introspection is in its security
// requirement.
func TestOpenAPIInsufficientScope(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, op := range operations(t, doc) {
		security, _ := op["security"].([]any)
		if len(security) == 0 {
			continue
		}
		r403, ok := obj(t, op["responses"], name)["403"]
		if !ok {
			t.Errorf("%s takes a token but documents no 403", name)
			continue
		}
		if codes := errorCodes(t, doc, deref(t, doc, r403)); !slices.Contains(codes, "insufficient_scope") {
			t.Errorf("%s 403: codes %v; want insufficient_scope among them", name, codes)
		}
	}
	op := operations(t, doc)["POST /api/auth/introspect/"]
	if op == nil {
		t.Fatal("POST /api/auth/introspect/ is not documented")
	}
	req, _ := json.Marshal(op["security"])
	if string(req) != `[{"tokenAuth":["introspect"]}]` {
		t.Errorf("introspect's security = %s; want the introspect scope", req)
	}
	body := obj(t, obj(t, op["requestBody"], "requestBody")["content"], "content")
	for _, media := range []string{"application/x-www-form-urlencoded", "application/json"} {
		if body[media] == nil {
			t.Errorf("introspect's request body does not document %s", media)
		}
	}
}

// routeDeps is a minimal real set of server dependencies.
func routeDeps(t *testing.T, metricsOnMain bool) Deps {
	t.Helper()
	// One user with a cheap hash: the dummy hash for unknown users takes the
	// file's cost, and an empty file would cost the default.
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, []users.User{{Username: "alice", PasswordHash: string(hash), Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	dir, err := usersfile.Open(path, discard)
	if err != nil {
		t.Fatal(err)
	}
	store := tokens.NewMemoryStore()
	adm := login.NewAdmission(1, 1, time.Second)
	hashing := password.DefaultHashPolicy()
	d := Deps{
		Log: discard, Users: dir, Store: store, Now: time.Now,
		Policy:        TokenPolicy{TTL: time.Hour, MaxPerUser: 10},
		MetricsOnMain: metricsOnMain,
		Passwords: PasswordSetter{
			Policy: password.Policy{MinLength: password.DefaultMinLength},
			Hash:   func(pw string) (string, error) { return hashing.Hash([]byte(pw)) },
		},
	}
	d.Metrics = NewMetrics(MetricsSources{Users: dir, Store: store, Admission: adm})
	d.Guard = &login.Guard{
		Throttle: throttle.NewMemory(throttle.Config{}), Admission: adm, Tarpit: login.NewTarpit(0, 1),
		Log: discard, Now: time.Now, Policy: hashing, Metrics: d.Metrics,
	}
	return d
}

// TestOpenAPIRoutes: every registered route is documented, and every
// documented operation is registered. GET /metrics must be documented, but
// is registered only when the metrics are served on the main listener.
func TestOpenAPIRoutes(t *testing.T) {
	// Routes registered only when configured: /metrics on the main
	// listener, and asking for a reset link when mail is set up.
	const metricsRoute, resetRoute = "GET /metrics", "POST /api/auth/password/reset/"
	documented := operations(t, loadOpenAPI(t))
	for _, r := range []string{metricsRoute, resetRoute} {
		if _, ok := documented[r]; !ok {
			t.Errorf("%s is not documented", r)
		}
	}
	for _, c := range []struct{ metricsOnMain, mail bool }{{false, false}, {true, true}, {false, true}} {
		t.Run(fmt.Sprintf("MetricsOnMain=%v,mail=%v", c.metricsOnMain, c.mail), func(t *testing.T) {
			d := routeDeps(t, c.metricsOnMain)
			if c.mail {
				d.ResetRequester = discardResets{}
			}
			routes := addRoutes(http.NewServeMux(), d)
			registered := make(map[string]bool)
			for _, r := range routes {
				if registered[r] {
					t.Errorf("%s registered twice", r)
				}
				registered[r] = true
				if _, ok := documented[r]; !ok {
					t.Errorf("%s is registered but not in openapi.json", r)
				}
			}
			want := map[string]bool{metricsRoute: c.metricsOnMain, resetRoute: c.mail}
			for op := range documented {
				wantRegistered := true
				if w, conditional := want[op]; conditional {
					wantRegistered = w
				}
				if registered[op] != wantRegistered {
					t.Errorf("%s registered = %v; want %v", op, registered[op], wantRegistered)
				}
			}
		})
	}
}

// discardResets is a ResetRequester that mails nothing: for listing routes.
type discardResets struct{}

func (discardResets) RequestReset(by, value, requestID string) {}

func TestOpenAPIHandler(t *testing.T) {
	onDisk, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != string(openAPIDoc) {
		t.Fatal("embedded document differs from openapi.json")
	}
	h := handleOpenAPI()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/api/openapi.json", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(len(openAPIDoc)) {
		t.Errorf("Content-Length %q, want %d", cl, len(openAPIDoc))
	}
	if w.Body.String() != string(openAPIDoc) {
		t.Error("body is not the document")
	}
	if !json.Valid(w.Body.Bytes()) {
		t.Error("body is not JSON")
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("HEAD", "/api/openapi.json", nil))
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d body bytes; want 200 and none", w.Code, w.Body.Len())
	}
}

// TestMetricRoutesMatchAddRoutes: every registered route has its series
// resolved in advance, and metricRoutes names no route that does not exist.
func TestMetricRoutesMatchAddRoutes(t *testing.T) {
	d := routeDeps(t, true)
	registered := map[string]bool{"other": true}
	for _, rt := range addRoutes(http.NewServeMux(), d) {
		_, path, _ := strings.Cut(rt, " ")
		label := routeLabel(path)
		registered[label] = true
		if _, ok := d.Metrics.routes[label]; !ok {
			t.Errorf("route %s (label %q) is missing from metricRoutes", rt, label)
		}
	}
	for _, label := range metricRoutes {
		if !registered[label] {
			t.Errorf("metricRoutes has %q, which addRoutes does not register", label)
		}
	}
}
