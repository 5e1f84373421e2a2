package integration

// TestDocs runs the documentation's sessions as they are pasted: the
// README's first start and curl session, the two-factor session and the
// Django switch-over. Pasted outputs drifted from the binary before; here
// a change to what a command prints fails until the documentation shows
// it. docs/operations.md ("Tested documentation") describes the markers
// for readers: a fenced block after <!-- doctest NAME [background|log] -->
// runs in session NAME, one bash in an empty folder with the binary as
// ./authsvc and on the PATH. A command ending in & runs in the background;
// in a background block every command does, and its pasted lines are its
// first lines; a log block lists lines its server must print, in order.
// Values that differ between runs (docVolatiles) bind to the real ones.

import (
	"authsvc/integration/harness"
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/mfa/mfatest"
	"authsvc/internal/testservers"
)

// TestDocs runs every marked session of docFiles and compares each
// command's output with the output pasted under it.
func TestDocs(t *testing.T) {
	harness.Long(t)
	// The documents whose marked blocks run, relative to the module root,
	// and the sessions they must hold, so that a marker lost in an edit
	// cannot quietly drop a session.
	docFiles := []string{"README.md", "docs/two-factor.md", "docs/django.md"}
	docWantSessions := []string{"quickstart", "two-factor", "django"}
	harness.RequireBinary(t)
	for _, tool := range []string{"curl", "oathtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			mfatest.SkipOrFail(t, "the documentation's sessions need %s: %v", tool, err)
		}
	}
	sessions := map[string][]docBlock{}
	for _, name := range docFiles {
		blocks, err := readDocBlocks(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			sessions[b.session] = append(sessions[b.session], b)
		}
	}
	for _, name := range docWantSessions {
		if len(sessions[name]) == 0 {
			t.Errorf("no block is marked <!-- doctest %s -->; want one in %s", name, strings.Join(docFiles, ", "))
		}
	}
	names := make([]string, 0, len(sessions))
	for name := range sessions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newDocSession(t, sessions[name]).run()
		})
	}
}

// docBlock is one marked fenced block.
type docBlock struct {
	file    string
	line    int    // of the block's first line inside the fence, 1-based
	session string // its NAME
	kind    string // "", "background" or "log"
	lines   []string
}

func (b docBlock) at(i int) string { return fmt.Sprintf("%s:%d", b.file, b.line+i) }

var docMarker = regexp.MustCompile(`^<!-- doctest ([a-z0-9-]+)(?: (background|log))? -->$`)

// readDocBlocks returns the marked blocks of the markdown file at path.
func readDocBlocks(path string) ([]docBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(filepath.ToSlash(path), "../")
	lines := strings.Split(string(data), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		m := docMarker.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.Contains(lines[i], "doctest") && strings.HasPrefix(lines[i], "<!--") {
				return nil, fmt.Errorf("%s:%d: %q is no doctest marker (want <!-- doctest NAME [background|log] -->)", name, i+1, lines[i])
			}
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return nil, fmt.Errorf("%s:%d: a doctest marker not followed by a fenced block", name, i+1)
		}
		b := docBlock{file: name, line: i + 3, session: m[1], kind: m[2]}
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			b.lines = append(b.lines, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the fenced block never ends", name, b.line-1)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// docCommand is one "$ command" of a block and the output pasted under it.
type docCommand struct {
	at   string // file:line
	text string // continuation lines joined with their newlines
	want []string
}

// commands splits a console block into its commands.
func (b docBlock) commands() ([]docCommand, error) {
	var cmds []docCommand
	for i := 0; i < len(b.lines); i++ {
		line := b.lines[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(cmds) == 0 {
				return nil, fmt.Errorf("%s: output before the first \"$ \" line", b.at(i))
			}
			cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, line)
			continue
		}
		c := docCommand{at: b.at(i), text: strings.TrimPrefix(line, "$ ")}
		for strings.HasSuffix(c.text, `\`) && i+1 < len(b.lines) {
			i++
			c.text += "\n" + b.lines[i]
		}
		cmds = append(cmds, c)
	}
	for i := range cmds {
		for len(cmds[i].want) > 0 && strings.TrimSpace(cmds[i].want[len(cmds[i].want)-1]) == "" {
			cmds[i].want = cmds[i].want[:len(cmds[i].want)-1]
		}
	}
	return cmds, nil
}

// docVolatile is a kind of value that differs between runs. find finds
// it in pasted text (its group 1, when it has one, is the value); value
// is what the real value may be. A bound kind stands for one real value
// throughout a session; the others (times, durations, ports) may differ
// at every appearance.
type docVolatile struct {
	find  *regexp.Regexp
	value string
	bound bool
}

func docVolatiles() []docVolatile {
	v := func(find, value string, bound bool) docVolatile {
		return docVolatile{regexp.MustCompile(find), value, bound}
	}
	const rfc3339 = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z`
	const httpDate = `[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT`
	return []docVolatile{
		v(rfc3339, rfc3339, false),
		v(httpDate, httpDate, false),
		v(`duration=(\S+)`, `\S+`, false),
		v(`client=127\.0\.0\.1:(\d+)`, `\d+`, false),
		v(`max_conns=(\d+)`, `\d+`, false),
		v(`\b[0-9a-f]{40}\b`, `[0-9a-f]{40}`, true),                                     // a token, an mfa_token
		v(`\b[0-9a-f]{32}\b`, `[0-9a-f]{32}`, true),                                     // a session id
		v(`\bauthsvc_pat_[0-9A-Za-z]{36}\b`, `authsvc_pat_[0-9A-Za-z]{36}`, true),       // a personal access token
		v(`"id":"([0-9a-f]{16})"`, `[0-9a-f]{16}`, true),                                // a personal access token's id
		v(`personal access token ([0-9a-f]{16})`, `[0-9a-f]{16}`, true),                 // its id, as token create prints it
		v(`"(?:iat|exp)":(\d+)`, `\d+`, false),                                          // introspection's times
		v(`\b([0-9a-f]{12})-\d+\b`, `[0-9a-f]{12}`, true),                               // a request id's per-process prefix
		v(`\b[A-Z2-7]{32}\b`, `[A-Z2-7]{32}`, true),                                     // a TOTP secret
		v(`\b[a-z2-7]{6}(?:-[a-z2-7]{6}){3}\b`, `[a-z2-7]{6}(?:-[a-z2-7]{6}){3}`, true), // a recovery code
		v(`(?m)password: ([A-Za-z0-9_-]{24})$`, `[A-Za-z0-9_-]{24}`, true),              // the admin's first password
		v(`\(key ([0-9a-f]{8})\)`, `[0-9a-f]{8}`, true),                                 // a secret key's ID
		v(`key_id=([0-9a-f]{8})\b`, `[0-9a-f]{8}`, true),
		v(`created the users file (/\S+)`, `/\S+`, false), // an absolute path, the test's folder
		v(`(?m)^(\d{6})$`, `\d{6}`, true),                 // a TOTP code on a line of its own
	}
}

// docSession runs one session's blocks.
type docSession struct {
	t        *testing.T
	blocks   []docBlock
	dir      string            // the folder the commands run in
	logs     string            // where background commands' output goes
	fixed    *strings.Replacer // addresses the test moves
	bind     map[string]string // pasted value → the real value a run bound it to
	volatile []docVolatile
	sh       *docShell
	bg       int    // background commands started
	server   string // the first one's output file
}

func newDocSession(t *testing.T, blocks []docBlock) *docSession {
	s := &docSession{t: t, blocks: blocks, dir: t.TempDir(), logs: t.TempDir(),
		bind: map[string]string{}, volatile: docVolatiles()}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"authsvc": harness.Binary(), "testdata": filepath.Join(root, "testdata")} {
		if err := os.Symlink(target, filepath.Join(s.dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	port := testservers.FreePort(t)
	moves := []string{"127.0.0.1:8080", "127.0.0.1:" + port, "localhost:8080", "localhost:" + port}
	if s.mentions("redis://127.0.0.1:6379/0") {
		url, _, _ := testservers.Redis(t)
		moves = append(moves, "redis://127.0.0.1:6379/0", url)
	}
	s.fixed = strings.NewReplacer(moves...)
	env := []string{"PATH=" + s.dir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + s.dir,
		"AUTHSVC_ADDR=127.0.0.1:" + port, "AUTHSVC_STORE_PREFIX=" + testservers.UniquePrefix()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUTHSVC_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	s.sh = startDocShell(t, s.dir, env)
	return s
}

// mentions reports whether a command of the session contains text.
func (s *docSession) mentions(text string) bool {
	for _, b := range s.blocks {
		if b.kind != "log" && slices.ContainsFunc(b.lines, func(l string) bool { return strings.Contains(l, text) }) {
			return true
		}
	}
	return false
}

func (s *docSession) run() {
	for _, b := range s.blocks {
		if b.kind == "log" {
			s.checkLog(b)
			continue
		}
		cmds, err := b.commands()
		if err != nil {
			s.t.Fatal(err)
		}
		for _, c := range cmds {
			if !s.runCommand(c, b.kind == "background") {
				return // later commands depend on this one
			}
		}
	}
}

// docBackground is a command ending in & (before any comment), not &&.
var docBackground = regexp.MustCompile(`^(.*[^&\s])\s*&\s*(?:#.*)?$`)

// runCommand runs c and compares its output; it reports whether the
// session may go on.
func (s *docSession) runCommand(c docCommand, background bool) bool {
	text := s.substitute(c.text)
	if m := docBackground.FindStringSubmatch(text); m != nil && !strings.Contains(text, "\n") {
		text, background = m[1], true
	}
	if background {
		return s.startBackground(c, text)
	}
	reloads := s.count("users file reloaded")
	got, err := s.sh.run(text, time.Minute)
	if err != nil {
		s.t.Errorf("%s: $ %s: %v\n%s", c.at, text, err, got)
		return false
	}
	if s.server != "" && docChangesUsers.MatchString(text) {
		// The running server picks up a change within --reload-interval
		// (1 s); a reader types slower than that, the test does not.
		s.waitFor(5*time.Second, func() bool { return s.count("users file reloaded") > reloads })
	}
	return s.compare(c, text, got, strings.Join(c.want, "\n"))
}

// docChangesUsers matches a command that changes the users file.
var docChangesUsers = regexp.MustCompile(`authsvc user (add|passwd|del|disable|enable|logout|unlock|reset-mfa|import)\b`)

// startBackground starts text in the background, waits for it to listen,
// and compares its first lines with those pasted under it.
func (s *docSession) startBackground(c docCommand, text string) bool {
	s.bg++
	out := filepath.Join(s.logs, fmt.Sprintf("background-%d.log", s.bg))
	if s.server == "" {
		s.server = out
	}
	if got, err := s.sh.run(fmt.Sprintf("%s >%q 2>&1 </dev/null &", text, out), 10*time.Second); err != nil || got != "" {
		s.t.Errorf("%s: $ %s &: %v %s", c.at, text, err, got)
		return false
	}
	listening := func() bool { return strings.Contains(docReadFile(out), "msg=listening") }
	if !s.waitFor(20*time.Second, listening) {
		s.t.Errorf("%s: $ %s &: no msg=listening line within 20 s; its output:\n%s", c.at, text, docReadFile(out))
		return false
	}
	lines := strings.Split(docReadFile(out), "\n")
	if len(lines) < len(c.want) {
		s.t.Errorf("%s: $ %s: printed %d lines; want at least %d:\n%s", c.at, text, len(lines), len(c.want), docReadFile(out))
		return false
	}
	return s.compare(c, text, strings.Join(lines[:len(c.want)], "\n"), strings.Join(c.want, "\n"))
}

// compare reports whether got is the pasted want, binding the volatile
// values got holds; otherwise it fails the test, showing both.
func (s *docSession) compare(c docCommand, text, got, want string) bool {
	if s.match(got, want) {
		return true
	}
	s.t.Errorf("%s: $ %s\nprinted:\n%s\nthe documentation shows:\n%s\n(paste what it printed, or fix what changed)", c.at, text, got, want)
	return false
}

// match reports whether got is want with want's volatile values replaced
// by real ones, and binds those.
func (s *docSession) match(got, want string) bool {
	re, names := s.pattern(s.fixed.Replace(want))
	m := re.FindStringSubmatch(got)
	if m == nil {
		return false
	}
	seen := map[string]string{}
	for i, name := range names {
		if name == "" {
			continue
		}
		if v, ok := seen[name]; ok && v != m[i+1] {
			return false // one pasted value, two real ones
		}
		seen[name] = m[i+1]
	}
	for name, v := range seen {
		s.bind[name] = v
	}
	return true
}

// pattern turns pasted text into a regexp for the real output: its
// volatile values become groups (a bound value already seen, the real
// value it was bound to), the rest literal. names holds each group's
// pasted value, or "" when any value will do every time.
func (s *docSession) pattern(want string) (*regexp.Regexp, []string) {
	type span struct {
		start, end int
		v          docVolatile
	}
	var spans []span
	for _, v := range s.volatile {
		for _, loc := range v.find.FindAllStringSubmatchIndex(want, -1) {
			start, end := loc[0], loc[1]
			if len(loc) > 2 {
				start, end = loc[2], loc[3]
			}
			if !slices.ContainsFunc(spans, func(o span) bool { return start < o.end && o.start < end }) {
				spans = append(spans, span{start, end, v})
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var re strings.Builder
	var names []string
	re.WriteString("^")
	last := 0
	for _, sp := range spans {
		re.WriteString(regexp.QuoteMeta(want[last:sp.start]))
		last = sp.end
		pasted := want[sp.start:sp.end]
		switch real, ok := s.bind[pasted]; {
		case sp.v.bound && ok:
			re.WriteString(regexp.QuoteMeta(real))
		case sp.v.bound:
			re.WriteString("(" + sp.v.value + ")")
			names = append(names, pasted)
		default:
			re.WriteString("(?:" + sp.v.value + ")")
		}
	}
	re.WriteString(regexp.QuoteMeta(want[last:]) + "$")
	return regexp.MustCompile(re.String()), names
}

// substitute gives a command the addresses the test moved and the real
// values bound to the pasted ones it repeats.
func (s *docSession) substitute(text string) string {
	text = s.fixed.Replace(text)
	pasted := make([]string, 0, len(s.bind))
	for p := range s.bind {
		pasted = append(pasted, p)
	}
	slices.SortFunc(pasted, func(a, b string) int { return len(b) - len(a) }) // longest first
	var pairs []string
	for _, p := range pasted {
		pairs = append(pairs, p, s.bind[p])
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// checkLog checks that the session's server printed b's lines, in order,
// among others. Lines are written after their reply, so it waits a little.
func (s *docSession) checkLog(b docBlock) {
	if s.server == "" {
		s.t.Errorf("%s: a log block, but no background command ran before it", b.at(0))
		return
	}
	var missing string
	matched := s.waitFor(5*time.Second, func() bool {
		saved := docCopy(s.bind)
		lines := strings.Split(docReadFile(s.server), "\n")
		next := 0
		for i, want := range b.lines {
			for next < len(lines) && !s.match(lines[next], want) {
				next++
			}
			if next == len(lines) {
				s.bind, missing = saved, fmt.Sprintf("%s: %s", b.at(i), want)
				return false
			}
			next++
		}
		return true
	})
	if !matched {
		s.t.Errorf("the server did not print, after the lines above it in the block,\n%s\nits output:\n%s", missing, docReadFile(s.server))
	}
}

// count is how many lines of the server's output contain text.
func (s *docSession) count(text string) int {
	if s.server == "" {
		return 0
	}
	return strings.Count(docReadFile(s.server), text)
}

// waitFor polls ok until it reports true or within has passed, and
// reports whether it did.
func (s *docSession) waitFor(within time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func docCopy(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func docReadFile(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimRight(string(data), "\n")
}

// docShell is one bash that runs a session's commands one after another,
// as a terminal would, keeping its variables and $? between them.
type docShell struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // stdout and stderr, interleaved as written
	n     int         // commands run, for their end markers
}

func startDocShell(t *testing.T, dir string, env []string) *docShell {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sh := &docShell{t: t, cmd: exec.Command("bash", "--noprofile", "--norc"), lines: make(chan string, 1024)}
	sh.cmd.Dir, sh.cmd.Env, sh.cmd.Stdout, sh.cmd.Stderr = dir, env, pw, pw
	// Its own process group: the cleanup ends the shell and everything it
	// started (servers, their hash workers) by that group's id.
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if sh.in, err = sh.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := sh.cmd.Start(); err != nil {
		t.Fatalf("bash: %v", err)
	}
	pw.Close()
	go func() {
		defer close(sh.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		sh.cmd.Wait()
		pr.Close()
	})
	return sh
}

// run runs text, its stdin empty, and returns what it printed on stdout
// and stderr (with \r\n as \n, trailing empty lines dropped). $? after it
// is text's exit status, as in a terminal.
func (sh *docShell) run(text string, within time.Duration) (string, error) {
	sh.n++
	end := fmt.Sprintf("--doctest-end-%d--", sh.n)
	script := fmt.Sprintf("{ %s\n} </dev/null\n__doctest_s=$?; printf '\\n%s\\n'; (exit $__doctest_s)\n", text, end)
	if _, err := io.WriteString(sh.in, script); err != nil {
		return "", err
	}
	var out []string
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-sh.lines:
			if !ok {
				return strings.Join(out, "\n"), fmt.Errorf("bash exited")
			}
			if line == end {
				for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
					out = out[:len(out)-1]
				}
				return strings.Join(out, "\n"), nil
			}
			out = append(out, strings.TrimSuffix(line, "\r"))
		case <-timeout:
			return strings.Join(out, "\n"), fmt.Errorf("still running after %v", within)
		}
	}
}
