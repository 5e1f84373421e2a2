package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMECodeMap: the README's code map ("Where things are") names
// every package of the module: internal/ ones each by its own path, the
// tooling under bench/ by bench/ as a whole, so that a newcomer finds
// every folder there.
func TestREADMECodeMap(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "## Where things are")
	if start < 0 {
		t.Fatal(`README.md has no "## Where things are"`)
	}
	section := string(readme[start:])
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\|([^|]*)\\|").FindAllStringSubmatch(section, -1) {
		for _, p := range regexp.MustCompile("`([^`]+)/`").FindAllStringSubmatch(m[1], -1) {
			listed[p[1]] = true
		}
	}
	packages := map[string]bool{}
	filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || d.Name() == "clients" || strings.HasPrefix(d.Name(), ".")) && path != ".":
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go") && filepath.Dir(path) != ".":
			packages[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if len(packages) < 10 {
		t.Fatalf("found %d packages; the walk is broken", len(packages))
	}
	for pkg := range packages {
		if listed[pkg] || strings.HasPrefix(pkg, "bench/") && listed["bench"] {
			continue
		}
		t.Errorf("README.md's code map does not name %s/", pkg)
	}
}
