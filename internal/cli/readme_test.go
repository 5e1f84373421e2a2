package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestREADMECodeMap: the README's code map ("Where things are") names
// every package of the module: internal/ ones each by its own path, the
// tooling under bench/ by bench/ as a whole, so that a newcomer finds
// every folder there; and every folder it names exists, so that a move
// leaves no stale row behind.
func TestREADMECodeMap(t *testing.T) {
	t.Parallel()
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
			if fi, err := os.Stat(p[1]); err != nil || !fi.IsDir() {
				t.Errorf("README.md's code map names %s/, which is no folder", p[1])
			}
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

// TestDocsLinks: every relative link in the repository's markdown names a
// file that exists and, with a #fragment into a markdown file, one of its
// headings, so that a section moved between guides leaves no link behind.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	var docs []string
	filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".":
			return filepath.SkipDir
		case strings.HasSuffix(path, ".md"):
			docs = append(docs, filepath.ToSlash(path))
		}
		return nil
	})
	if len(docs) < 5 {
		t.Fatalf("found %d markdown files; the walk is broken", len(docs))
	}
	fence := regexp.MustCompile("(?ms)^```.*?^```")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{} // file → its headings' anchors
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(data), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target, fragment, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, ":") {
				continue // https:, mailto:
			}
			path := doc
			if target != "" {
				path = filepath.ToSlash(filepath.Join(filepath.Dir(doc), target))
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s: %v", doc, m[1], err)
				continue
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = headingAnchors(t, path, fence)
			}
			if !anchors[path][fragment] {
				t.Errorf("%s links %s: %s has no heading whose anchor is #%s", doc, m[1], path, fragment)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of the
// markdown file at path: lower case, spaces as hyphens, and every
// character but letters, digits, _ and - left out.
func headingAnchors(t *testing.T, path string, fence *regexp.Regexp) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.*)$`).FindAllStringSubmatch(fence.ReplaceAllString(string(data), ""), -1) {
		anchor := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(m[1]))
		anchors[anchor] = true
	}
	return anchors
}
