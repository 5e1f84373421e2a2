package httpapi

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The OAS 3.1 schemas and the script that checks a document against them
// with Debian's python3-jsonschema (testdata/oas3.1/README.md).
const (
	oasSchemaDir = "testdata/oas3.1"
	oasValidator = "testdata/oas3.1/validate.py"
	python       = "/usr/bin/python3"
)

// requirePython reports whether a missing python3-jsonschema fails the
// test rather than skipping it: AUTHSVC_REQUIRE_PYTHON=1 (.ci/run) or CI.
func requirePython() bool {
	ci := os.Getenv("CI")
	return os.Getenv("AUTHSVC_REQUIRE_PYTHON") == "1" || (ci != "" && ci != "0" && ci != "false")
}

// needJSONSchema skips the test, or fails it under requirePython, when
// /usr/bin/python3 has no jsonschema with Draft 2020-12.
func needJSONSchema(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "from jsonschema import Draft202012Validator").CombinedOutput()
	if err == nil {
		return
	}
	if requirePython() {
		t.Fatalf("%s has no jsonschema with Draft 2020-12 (apt-get install python3-jsonschema): %v\n%s (AUTHSVC_REQUIRE_PYTHON=1 or CI is set)", python, err, out)
	}
	t.Skipf("%s has no jsonschema with Draft 2020-12 (apt-get install python3-jsonschema): %v (set AUTHSVC_REQUIRE_PYTHON=1 to fail instead)", python, err)
}

// validateOAS returns the validator's complaints about the document at
// path, and whether it accepted it.
func validateOAS(t *testing.T, path string) (string, bool) {
	t.Helper()
	out, err := exec.Command(python, oasValidator, oasSchemaDir, path).CombinedOutput()
	if err == nil {
		return string(out), true
	}
	if e, ok := err.(*exec.ExitError); ok && e.ExitCode() == 1 && len(out) > 0 {
		return string(out), false
	}
	t.Fatalf("%s %s: %v\n%s", python, oasValidator, err, out)
	return "", false
}

// TestOpenAPISchema: openapi.json is a valid OpenAPI 3.1 document under
// the OpenAPI Initiative's schema, and every Schema Object in it is valid
// under the OAS dialect (schema-base).
func TestOpenAPISchema(t *testing.T) {
	t.Parallel()
	needJSONSchema(t)
	if out, ok := validateOAS(t, "openapi.json"); !ok {
		t.Errorf("openapi.json is not a valid OpenAPI 3.1 document:\n%s", out)
	}
}

// TestOpenAPISchemaCanFail: the validator rejects a copy of the document
// broken one way of each kind, and names the place.
func TestOpenAPISchemaCanFail(t *testing.T) {
	t.Parallel()
	needJSONSchema(t)
	for _, c := range []struct {
		name   string
		mutate func(doc map[string]any)
		want   string // a part of the complaint
	}{
		{"a response without description", func(doc map[string]any) {
			delete(responseOf(t, doc, "/api/auth/login/", "post", "200"), "description")
		}, "'description' is a required property"},
		{"a schema with type strng", func(doc map[string]any) {
			errSchema := obj(t, obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")["Error"], "Error")
			obj(t, obj(t, errSchema["properties"], "properties")["code"], "code")["type"] = "strng"
		}, "components/schemas/Error/properties/code/type"},
		{"an unknown field in an operation", func(doc map[string]any) {
			op := obj(t, obj(t, obj(t, doc["paths"], "paths")["/api/auth/login/"], "login")["post"], "post")
			op["summery"] = "typo"
		}, "'summery' was unexpected"},
		{"a parameter in nowhere", func(doc map[string]any) {
			for _, op := range operations(t, doc) {
				params, _ := op["parameters"].([]any)
				for _, p := range params {
					if m, ok := p.(map[string]any); ok && m["in"] != nil {
						m["in"] = "body"
						return
					}
				}
			}
			t.Fatal("no operation has an inline parameter to break")
		}, "'body' is not one of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := loadOpenAPI(t)
			c.mutate(doc)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "openapi.json")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, ok := validateOAS(t, path)
			if ok {
				t.Fatalf("validate(%s) accepted it; want a complaint containing %q", c.name, c.want)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("validate(%s) = %s; want a complaint containing %q", c.name, out, c.want)
			}
		})
	}
}

// responseOf returns doc's response status of method on path.
func responseOf(t *testing.T, doc map[string]any, path, method, status string) map[string]any {
	t.Helper()
	op := obj(t, obj(t, obj(t, doc["paths"], "paths")[path], path)[method], method+" "+path)
	return obj(t, obj(t, op["responses"], "responses")[status], status)
}
