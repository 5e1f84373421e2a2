package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The deployment files run the binary with flags and variables: these tests
// hold them to what parseServeFlags accepts, and to their hardening.

const (
	unitFile       = "deploy/authsvc.service"
	dockerfile     = "Dockerfile"
	dockerignore   = ".dockerignore"
	unitBinaryPath = "/usr/local/bin/authsvc"
)

// logicalLines returns the lines of a file whose lines continue with a
// trailing backslash, joined, with blank and comment lines dropped.
func logicalLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';') {
			continue
		}
		if cur.Len() > 0 && trimmed != "" && trimmed[0] == '#' {
			continue // a comment inside a continued line
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body)
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(trimmed)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		lines = append(lines, strings.TrimSpace(cur.String()))
	}
	return lines
}

// splitWords splits s into words as systemd and a shell do for plain
// words: white space separates, single and double quotes group, a
// backslash escapes the next character outside single quotes.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("unterminated quote or escape in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// systemdUnit is a unit file: section → key → values in order.
type systemdUnit map[string]map[string][]string

func parseUnit(t *testing.T, name string) systemdUnit {
	t.Helper()
	u := make(systemdUnit)
	section := ""
	for _, line := range logicalLines(t, name) {
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = make(map[string][]string)
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s: not a key=value line in a section: %q", name, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	return u
}

// one returns the single value of key in section, failing otherwise.
func (u systemdUnit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s: want exactly one, got %q", section, key, v)
	}
	return v[0]
}

// unitEnv returns the variables the unit's Environment= lines set.
func unitEnv(t *testing.T, u systemdUnit) map[string]string {
	t.Helper()
	env := make(map[string]string)
	for _, line := range u["Service"]["Environment"] {
		if line == "" {
			clear(env) // an empty assignment resets the list
			continue
		}
		words, err := splitWords(line)
		if err != nil {
			t.Fatalf("Environment=%s: %v", line, err)
		}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok || k == "" {
				t.Fatalf("Environment=%s: %q is not NAME=VALUE", line, w)
			}
			env[k] = v
		}
	}
	return env
}

// serveArgs checks that command runs "<binary> serve ..." and returns the
// arguments after serve.
func serveArgs(t *testing.T, what string, command []string, binary string) []string {
	t.Helper()
	if len(command) < 2 || command[0] != binary || command[1] != "serve" {
		t.Fatalf("%s: %q does not run %s serve", what, command, binary)
	}
	return command[2:]
}

// checkServeFlags asserts that args and env are a valid serve configuration,
// and that every AUTHSVC_* variable in env is one that a serve flag reads.
func checkServeFlags(t *testing.T, what string, args []string, env map[string]string) serveConfig {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	noenv := func(string) string { return "" }
	cfg, err := parseServeFlags(args, getenv, io.Discard)
	if err != nil {
		t.Fatalf("%s: serve %q with its environment: %v", what, args, err)
	}
	defaults, err := parseServeFlags(nil, noenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		rest, ok := strings.CutPrefix(k, "AUTHSVC_")
		if !ok {
			continue
		}
		flagName := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		if envName(flagName) != k {
			t.Errorf("%s: %s is not the variable of any flag name", what, k)
			continue
		}
		byFlag, err := parseServeFlags([]string{"--" + flagName + "=" + v}, noenv, io.Discard)
		if err != nil {
			t.Errorf("%s: %s=%s names no serve flag that accepts it: --%s=%s: %v", what, k, v, flagName, v, err)
			continue
		}
		byEnv, err := parseServeFlags(nil, func(name string) string {
			if name == k {
				return v
			}
			return ""
		}, io.Discard)
		if err != nil {
			t.Errorf("%s: %s=%s: %v", what, k, v, err)
			continue
		}
		if !reflect.DeepEqual(byEnv, byFlag) {
			t.Errorf("%s: %s=%s is not read the way --%s=%s is", what, k, v, flagName, v)
		}
		if reflect.DeepEqual(byFlag, defaults) {
			t.Logf("%s: %s=%s is the default", what, k, v)
		}
	}
	return cfg
}

func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, unitFile)
	svc := u["Service"]
	if svc == nil {
		t.Fatal("no [Service] section")
	}

	exec := u.one(t, "Service", "ExecStart")
	exec = strings.TrimLeft(exec, "@-:+!") // systemd's command prefixes
	command, err := splitWords(exec)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range command {
		if strings.ContainsAny(w, "$%") {
			t.Fatalf("ExecStart word %q: systemd would expand it; this test cannot", w)
		}
	}
	args := serveArgs(t, "ExecStart", command, unitBinaryPath)
	env := unitEnv(t, u)
	cfg := checkServeFlags(t, unitFile, args, env)

	// The users file must be writable (the CLI and the first start write it)
	// under ProtectSystem=strict: in the StateDirectory or a ReadWritePaths.
	usersDir := path.Dir(cfg.usersPath)
	writable := false
	for _, d := range svc["StateDirectory"] {
		for _, name := range strings.Fields(d) {
			writable = writable || usersDir == "/var/lib/"+name
		}
	}
	for _, d := range svc["ReadWritePaths"] {
		for _, p := range strings.Fields(d) {
			writable = writable || usersDir == strings.TrimPrefix(p, "-")
		}
	}
	if !writable {
		t.Errorf("users file %s is not in the StateDirectory or a ReadWritePaths", cfg.usersPath)
	}

	for key, want := range map[string]string{
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"Restart":         "on-failure",
		"UMask":           "0077",
	} {
		if got := u.one(t, "Service", key); got != want {
			t.Errorf("%s=%s, want %s", key, got, want)
		}
	}
	caps, ok := svc["CapabilityBoundingSet"]
	if !ok || slices.ContainsFunc(caps, func(v string) bool { return v != "" }) {
		t.Errorf("CapabilityBoundingSet=%q, want only an empty assignment", caps)
	}
	if svc["DynamicUser"] == nil || u.one(t, "Service", "DynamicUser") != "yes" {
		if user := svc["User"]; len(user) != 1 || user[0] == "" || user[0] == "root" || user[0] == "0" {
			t.Errorf("User=%q: want a dedicated user, or DynamicUser=yes", user)
		}
	}
	if reload := u.one(t, "Service", "ExecReload"); !strings.Contains(reload, "-HUP $MAINPID") {
		t.Errorf("ExecReload=%s does not send SIGHUP (which reloads the users file)", reload)
	}
}

// dockerInstr is one Dockerfile instruction.
type dockerInstr struct {
	cmd, rest string
}

// finalStage returns the instructions of the Dockerfile's last stage, FROM included.
func finalStage(t *testing.T) []dockerInstr {
	t.Helper()
	var stage []dockerInstr
	for _, line := range logicalLines(t, dockerfile) {
		cmd, rest, _ := strings.Cut(line, " ")
		in := dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(rest)}
		if in.cmd == "FROM" {
			stage = nil
		}
		stage = append(stage, in)
	}
	if len(stage) == 0 || stage[0].cmd != "FROM" {
		t.Fatal("Dockerfile: no FROM")
	}
	return stage
}

// last returns the rest of the stage's last instruction cmd.
func last(stage []dockerInstr, cmd string) (string, bool) {
	for i := len(stage) - 1; i >= 0; i-- {
		if stage[i].cmd == cmd {
			return stage[i].rest, true
		}
	}
	return "", false
}

// execForm parses the JSON array form of CMD or ENTRYPOINT.
func execForm(t *testing.T, stage []dockerInstr, cmd string) []string {
	t.Helper()
	rest, ok := last(stage, cmd)
	if !ok {
		t.Fatalf("Dockerfile: the final stage has no %s", cmd)
	}
	var words []string
	if err := json.Unmarshal([]byte(rest), &words); err != nil {
		t.Fatalf("Dockerfile: %s %s: not a JSON array of strings: %v", cmd, rest, err)
	}
	return words
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	stage := finalStage(t)
	entrypoint := execForm(t, stage, "ENTRYPOINT")
	if len(entrypoint) != 1 {
		t.Fatalf("ENTRYPOINT %q: want just the binary", entrypoint)
	}
	command := append(entrypoint, execForm(t, stage, "CMD")...)
	args := serveArgs(t, "ENTRYPOINT+CMD", command, entrypoint[0])

	env := make(map[string]string)
	for _, in := range stage {
		if in.cmd != "ENV" {
			continue
		}
		words, err := splitWords(in.rest)
		if err != nil {
			t.Fatal(err)
		}
		if len(words) == 2 && !strings.Contains(words[0], "=") {
			words = []string{words[0] + "=" + words[1]} // ENV NAME VALUE
		}
		for _, w := range words {
			k, v, _ := strings.Cut(w, "=")
			env[k] = v
		}
	}
	cfg := checkServeFlags(t, dockerfile, args, env)

	// Reachable from outside the container, on the port it exposes.
	host, port, err := net.SplitHostPort(cfg.addr)
	if err != nil {
		t.Fatalf("--addr %q: %v", cfg.addr, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("--addr %s: only reachable inside the container; want 0.0.0.0 or [::]", cfg.addr)
	}
	if expose, _ := last(stage, "EXPOSE"); !slices.Contains(strings.Fields(expose), port) && !slices.Contains(strings.Fields(expose), port+"/tcp") {
		t.Errorf("EXPOSE %s does not include --addr's port %s", expose, port)
	}

	// The users file lives in a volume.
	var volumes []string
	for _, in := range stage {
		if in.cmd != "VOLUME" {
			continue
		}
		var list []string
		if json.Unmarshal([]byte(in.rest), &list) != nil {
			list = strings.Fields(in.rest)
		}
		volumes = append(volumes, list...)
	}
	if dir := path.Dir(cfg.usersPath); !slices.Contains(volumes, dir) {
		t.Errorf("users file %s: its directory is not a VOLUME (volumes %q)", cfg.usersPath, volumes)
	}

	// Not root.
	user, ok := last(stage, "USER")
	uid, _, _ := strings.Cut(user, ":")
	if !ok || uid == "" || uid == "root" || uid == "0" {
		t.Errorf("final stage USER %q: want a non-root user", user)
	}
}

// TestDockerignore: the build context keeps what go build needs, the
// embedded openapi.json included.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	needed := []string{"go.mod", "go.sum", "internal/httpapi/openapi.json", "internal/password/commonpasswords.txt"}
	err := filepath.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case e.IsDir() && (p == "bench" || strings.HasPrefix(e.Name(), ".") && p != "."):
			return fs.SkipDir
		case strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go"):
			needed = append(needed, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range logicalLines(t, dockerignore) {
		if strings.HasPrefix(pattern, "!") {
			continue
		}
		pattern = strings.TrimPrefix(path.Clean(pattern), "/")
		for _, name := range needed {
			if ok, err := path.Match(pattern, name); err != nil {
				t.Errorf(".dockerignore %q: %v", pattern, err)
			} else if ok {
				t.Errorf(".dockerignore %q leaves %s out of the build", pattern, name)
			}
		}
	}
}

// composeService is what the compose test reads of one service: its
// command (flow form) and environment (block form).
type composeService struct {
	command  []string
	env      map[string]string
	groupAdd []string
}

// readCompose reads the services of docker-compose.yml: the small subset of
// YAML the file uses (services at indent 2, keys at 4, environment entries
// at 6, commands as JSON-style flow lists). A file outside that subset fails
// the test rather than being misread.
func readCompose(t *testing.T) map[string]*composeService {
	t.Helper()
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	services := make(map[string]*composeService)
	var cur *composeService
	inServices, inEnv := false, false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		text := strings.TrimSpace(line)
		switch {
		case indent == 0:
			inServices, cur = text == "services:", nil
		case !inServices:
		case indent == 2:
			cur = &composeService{env: map[string]string{}}
			services[strings.TrimSuffix(text, ":")] = cur
			inEnv = false
		case indent == 4:
			key, value, _ := strings.Cut(text, ":")
			inEnv = key == "environment"
			switch key {
			case "command":
				if err := json.Unmarshal([]byte(strings.TrimSpace(value)), &cur.command); err != nil {
					t.Fatalf("docker-compose.yml: command %q: want a flow list: %v", value, err)
				}
			case "group_add":
				if err := json.Unmarshal([]byte(strings.TrimSpace(value)), &cur.groupAdd); err != nil {
					t.Fatalf("docker-compose.yml: group_add %q: want a flow list: %v", value, err)
				}
			}
		case indent == 6 && inEnv:
			key, value, ok := strings.Cut(text, ": ")
			if !ok {
				t.Fatalf("docker-compose.yml: environment entry %q: want KEY: value", text)
			}
			cur.env[key] = value
		}
	}
	return services
}

// TestCompose: docker-compose.yml's fleet is two authsvc instances whose
// flags and variables the real serve FlagSet accepts, sharing one
// PostgreSQL (users) and one Redis (tokens and throttle) of the same file.
func TestCompose(t *testing.T) {
	t.Parallel()
	services := readCompose(t)
	entrypoint := execForm(t, finalStage(t), "ENTRYPOINT")
	var fleet []serveConfig
	for _, name := range []string{"authsvc-a", "authsvc-b"} {
		s, ok := services[name]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %s", name)
		}
		args := serveArgs(t, name, append(slices.Clone(entrypoint), s.command...), entrypoint[0])
		cfg := checkServeFlags(t, "docker-compose.yml "+name, args, s.env)
		if host, _, _ := net.SplitHostPort(cfg.addr); host != "0.0.0.0" {
			t.Errorf("%s: --addr %s; want 0.0.0.0, reachable from the other containers", name, cfg.addr)
		}
		if !isPostgresURL(cfg.usersPath) || !strings.HasPrefix(cfg.store, "redis://") {
			t.Errorf("%s: users %q, store %q; want PostgreSQL and Redis", name, cfg.usersPath, cfg.store)
		}
		for _, raw := range []string{cfg.usersPath, cfg.store} {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, ok := services[u.Hostname()]; !ok {
				t.Errorf("%s: %s names host %q, which is no service of the file", name, u.Redacted(), u.Hostname())
			}
		}
		fleet = append(fleet, cfg)
	}
	for _, name := range []string{"authsvc-a", "authsvc-b"} {
		// The key is bind-mounted with the host's owner and mode (0640, as
		// the header makes it): uid 65532 reads it only through its group.
		if _, ok := services[name].env["AUTHSVC_SECRET_KEY_FILE"]; ok && !slices.Contains(services[name].groupAdd, "${AUTHSVC_KEY_GID:?set it in .env to the group id of authsvc.key (see the first lines of docker-compose.yml)}") {
			t.Errorf("%s: group_add = %q; want the key file's group (AUTHSVC_KEY_GID), or uid 65532 cannot read the host's key", name, services[name].groupAdd)
		}
	}
	if fleet[0].usersPath != fleet[1].usersPath || fleet[0].store != fleet[1].store {
		t.Errorf("the two instances do not share their users and store: %q %q vs %q %q", fleet[0].usersPath, fleet[0].store, fleet[1].usersPath, fleet[1].store)
	}
}

// TestComposeHeader: the commands in docker-compose.yml's header comment
// work as pasted. A "$VAR" in a command run in a container expands in the
// host's shell, where the service's environment is not; the admin's
// password is printed by whichever instance sets up the database first, so
// the logs command asks every instance.
func TestComposeHeader(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	services := readCompose(t)
	sawLogs := false
	for _, line := range strings.Split(string(data), "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			break // the header ends at the first line that is no comment
		}
		text = strings.TrimSpace(text)
		if strings.HasPrefix(text, "docker compose exec") && strings.Contains(text, "$") {
			t.Errorf("docker-compose.yml header: %q: the $ expands on the host, not in the container", text)
		}
		if strings.HasPrefix(text, "docker compose logs") && strings.Contains(text, "password") {
			sawLogs = true
			words := strings.Fields(text)
			for name := range services {
				if strings.HasPrefix(name, "authsvc") && !slices.Contains(words, name) {
					t.Errorf("docker-compose.yml header: %q does not ask %s, which may be the instance that prints the admin's password", text, name)
				}
			}
		}
	}
	if !sawLogs {
		t.Error("docker-compose.yml header: no 'docker compose logs … password' line: how is the admin's password found?")
	}
}
