package httpapi

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// apiDocPath is the API reference, relative to this package's directory.
const apiDocPath = "../../docs/API.md"

// docs/API.md's conventions, which the test reads it by:
//   - each endpoint is a level-3 heading "### METHOD /path", the path as
//     openapi.json spells it; no other heading starts with a method;
//   - an endpoint's section runs to the next heading of level 1 to 3, and
//     its status table's rows start with "| <status> |", then the code
//     cell: an error row names its code in backticks, a success row none;
//   - the "## Errors" section's table has a row "| <status> | `code` |"
//     for every error code.
var (
	docHeading   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*$`)
	docEndpoint  = regexp.MustCompile(`^([A-Z]+) (/\S*)$`)
	docStatusRow = regexp.MustCompile(`^\|\s*(\d{3})\s*\|([^|]*)\|`)
	docCode      = regexp.MustCompile("`([a-z_]+)`")
)

// docCodes maps a status to the codes its rows name; a row that names no
// code adds "".
type docCodes map[string]map[string]bool

func (c docCodes) add(status, cell string) {
	if c[status] == nil {
		c[status] = make(map[string]bool)
	}
	codes := docCode.FindAllStringSubmatch(cell, -1)
	if len(codes) == 0 {
		c[status][""] = true
	}
	for _, m := range codes {
		c[status][m[1]] = true
	}
}

// apiDoc is what the test reads from docs/API.md.
type apiDoc struct {
	endpoints map[string]docCodes // "METHOD /path" → its status table
	errors    docCodes            // the Errors table
	problems  []string            // conventions broken
}

// parseAPIDoc reads md by the conventions above. Fenced code blocks are
// skipped.
func parseAPIDoc(md string) apiDoc {
	d := apiDoc{endpoints: make(map[string]docCodes), errors: make(docCodes)}
	var section docCodes // the table rows go to, if any
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		where := fmt.Sprintf("docs/API.md:%d", i+1)
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := docHeading.FindStringSubmatch(line); m != nil {
			level, text := len(m[1]), m[2]
			first, _, _ := strings.Cut(text, " ")
			isMethod := slices.Contains(openAPIMethods, strings.ToLower(first)) && first == strings.ToUpper(first)
			ep := docEndpoint.FindStringSubmatch(text)
			switch {
			case isMethod && (level != 3 || ep == nil):
				d.problems = append(d.problems, fmt.Sprintf("%s: heading %q starts with a method but is not \"### METHOD /path\"", where, line))
			case level <= 3 && ep != nil:
				key := ep[1] + " " + ep[2]
				if _, dup := d.endpoints[key]; dup {
					d.problems = append(d.problems, fmt.Sprintf("%s: a second section for %s", where, key))
				}
				section = make(docCodes)
				d.endpoints[key] = section
			case level <= 3:
				section = nil
				if level == 2 && text == "Errors" {
					section = d.errors
				}
			}
			continue
		}
		if m := docStatusRow.FindStringSubmatch(line); m != nil && section != nil {
			section.add(m[1], m[2])
		}
	}
	return d
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// codeList shows a set of codes, "" as "no code".
func codeList(set map[string]bool) string {
	var s []string
	for _, c := range sortedKeys(set) {
		if c == "" {
			c = "(no code)"
		}
		s = append(s, c)
	}
	return strings.Join(s, ", ")
}

// docProblems returns every way md (docs/API.md) disagrees with doc
// (openapi.json), and its Errors table with respond.go's statuses.
func docProblems(t *testing.T, doc map[string]any, md string) []string {
	t.Helper()
	d := parseAPIDoc(md)
	problems := d.problems

	// Endpoints both ways, then each one's statuses and codes both ways.
	ops := operations(t, doc)
	for _, name := range sortedKeys(d.endpoints) {
		if _, ok := ops[name]; !ok {
			problems = append(problems, fmt.Sprintf("docs/API.md has \"### %s\", which is no operation in openapi.json", name))
		}
	}
	for _, name := range sortedKeys(ops) {
		rows, ok := d.endpoints[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("openapi.json's %s has no \"### %s\" section in docs/API.md", name, name))
			continue
		}
		want := make(docCodes)
		for status, v := range obj(t, ops[name]["responses"], name+" responses") {
			codes := errorCodes(t, doc, deref(t, doc, v))
			if len(codes) == 0 {
				want.add(status, "")
			}
			for _, c := range codes {
				want.add(status, "`"+c+"`")
			}
		}
		for _, status := range sortedKeys(want) {
			if rows[status] == nil {
				problems = append(problems, fmt.Sprintf("%s: openapi.json documents %s, docs/API.md has no \"| %s |\" row", name, status, status))
			}
		}
		for _, status := range sortedKeys(rows) {
			switch {
			case want[status] == nil:
				problems = append(problems, fmt.Sprintf("%s: docs/API.md has a \"| %s |\" row, openapi.json documents no %s", name, status, status))
			case !mapsEqual(rows[status], want[status]):
				problems = append(problems, fmt.Sprintf("%s %s: docs/API.md's rows name %s; openapi.json: %s", name, status, codeList(rows[status]), codeList(want[status])))
			}
		}
	}

	// Every error code in the Errors table, with the status respond.go
	// answers it with; no code there that openapi.json does not know.
	errSchema := obj(t, obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")["Error"], "Error")
	codeSchema := obj(t, obj(t, errSchema["properties"], "Error.properties")["code"], "Error.code")
	enum, _ := codeSchema["enum"].([]any)
	known := make(map[string]bool)
	statuses := errorStatuses(t)
	for _, v := range enum {
		code, _ := v.(string)
		known[code] = true
		if !strings.Contains(md, "`"+code+"`") {
			problems = append(problems, fmt.Sprintf("error code %q (openapi.json) does not appear in docs/API.md", code))
		}
		status := strconv.Itoa(statuses[code])
		if !d.errors[status][code] {
			problems = append(problems, fmt.Sprintf("docs/API.md's Errors table has no \"| %s | `%s` |\" row", status, code))
		}
	}
	for _, status := range sortedKeys(d.errors) {
		for _, code := range sortedKeys(d.errors[status]) {
			switch {
			case code == "":
				problems = append(problems, fmt.Sprintf("docs/API.md's Errors table: a %s row names no code", status))
			case !known[code]:
				problems = append(problems, fmt.Sprintf("docs/API.md's Errors table: %q is not in openapi.json's Error.code", code))
			case strconv.Itoa(statuses[code]) != status:
				problems = append(problems, fmt.Sprintf("docs/API.md's Errors table: %q under %s; the server answers it with %d", code, status, statuses[code]))
			}
		}
	}
	return problems
}

// mapsEqual reports whether two sets hold the same members.
func mapsEqual(a, b map[string]bool) bool {
	return slices.Equal(sortedKeys(a), sortedKeys(b))
}

// readAPIDoc returns docs/API.md.
func readAPIDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatalf("the API reference: %v", err)
	}
	return string(b)
}

// TestDocsMatchOpenAPI: docs/API.md documents exactly openapi.json's
// operations, each with exactly its statuses and error codes, and every
// error code with its status.
func TestDocsMatchOpenAPI(t *testing.T) {
	for _, p := range docProblems(t, loadOpenAPI(t), readAPIDoc(t)) {
		t.Error(p)
	}
}

// TestDocsCheckCanFail: the check above notices docs/API.md drifting from
// openapi.json, one way of each kind.
func TestDocsCheckCanFail(t *testing.T) {
	doc, md := loadOpenAPI(t), readAPIDoc(t)
	section := func(name string) (start, end int) {
		start = strings.Index(md, "\n### "+name+"\n")
		if start < 0 {
			t.Fatalf("docs/API.md has no section %s", name)
		}
		end = strings.Index(md[start+1:], "\n### ")
		if end < 0 {
			return start, len(md)
		}
		return start, start + 1 + end
	}
	start, end := section("POST /api/auth/login/")
	login := md[start:end]
	row429 := regexp.MustCompile(`(?m)^\| 429 \|.*\n`)
	if !row429.MatchString(login) {
		t.Fatal("the login section has no 429 row")
	}
	for name, broken := range map[string]string{
		"status row removed": md[:start] + row429.ReplaceAllString(login, "") + md[end:],
		"status row added":   md[:start] + strings.Replace(login, "| 429 |", "| 418 | `throttled` | x |\n| 429 |", 1) + md[end:],
		"code changed":       md[:start] + strings.Replace(login, "`invalid_credentials` |", "`invalid_token` |", 1) + md[end:],
		"section missing":    md[:start] + "\n### The login\n" + md[start+len("\n### POST /api/auth/login/\n"):],
		"unknown endpoint":   md + "\n### GET /api/auth/nowhere\n\n| 200 | — | x |\n",
		"malformed heading":  md + "\n## POST /api/auth/login/ and more\n",
		"error code dropped": strings.ReplaceAll(md, "`request_too_large`", "`too_large`"),
	} {
		if len(docProblems(t, doc, broken)) == 0 {
			t.Errorf("%s: no problem found", name)
		}
	}
}
