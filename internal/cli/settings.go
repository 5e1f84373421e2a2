package cli

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens/redisstore"
	"authsvc/internal/users"
)

// serveConfig is the serve command's settings, parsed.
type serveConfig struct {
	addr              string
	usersPath         string
	tokenTTL          time.Duration
	tokenIdle         time.Duration
	patMaxTTL         time.Duration
	store             string
	storePrefix       string
	storeCache        int
	maxPerUser        int
	reloadInterval    time.Duration
	logFormat         string
	throttle          throttle.Config
	trustedProxies    []netip.Prefix
	passwordSlots     int
	passwordQueue     int
	passwordWait      time.Duration
	passwordIdle      time.Duration
	refusalDelay      time.Duration
	metricsAddr       string
	corsOrigins       []string
	accessLog         bool
	maxConns          int
	userCache         int
	passwordMinLength int
	hashing           hashFlags           // --hash and --cost as given
	hashPolicy        password.HashPolicy // what they mean

	// deprecated says, a line each, what was given under a former name,
	// for serve to log once it has a logger.
	deprecated []string

	// The repeatable flags as given, before parsing into the fields above.
	trustedRaw, corsRaw stringList

	secretKeyFile    string     // "": authsvc.key beside a users file; none with PostgreSQL
	oldSecretKeyFile stringList // keys a rotation replaced, still opening what they sealed
	mfaIssuer        string
	requireMFARaw    string          // --require-mfa as given
	requireMFA       users.MFAPolicy // what it means

	// Password reset links and their mail (API.md, "Password reset").
	resetURL          string        // the link's pattern, with {uid} and {token}
	resetTTL          time.Duration // how long a link works
	smtpURL           string        // "": no mail, and no reset request route; holds the SMTP password
	mailFrom          string        // required with smtpURL
	resetMailTemplate string        // a text/template file; "": the built-in one
}

// A setting is one serve flag, written once: the FlagSet, the AUTHSVC_*
// variable that gives its default, --help and the README's flag table all
// derive from it (TestREADMEFlagTable keeps the README in step).
type setting struct {
	name    string // the flag; its variable is envName(name)
	was     string // the flag's deprecated former name, still taken with a warning; "" for none
	arg     string // the value's name in --help; "" for a bool
	def     any    // the default, of the field's type; nil for none
	defText string // the default as --help and the README show it, when not def's own text
	help    string
	section string                 // the --help heading it is listed under; "" for the first
	field   func(*serveConfig) any // a pointer to the field it sets
}

// defaultUsersPath is where the users are unless --users or AUTHSVC_USERS
// says otherwise, for serve and the user commands alike.
const defaultUsersPath = "users.json"

// Sections of --help, in order.
const (
	sectionThrottle = "login throttling"
	sectionHashing  = "password checking"
	sectionReset    = "password reset"
)

// serveSettings returns every serve setting, in the order --help lists
// them. A function, not a variable: the hashing defaults follow
// GOMAXPROCS at the time of the call.
func serveSettings() []setting {
	return slices.Concat(serverSettings(), tokenSettings(), httpSettings(),
		secretSettings(), throttleSettings(), hashingSettings(), resetSettings())
}

// serverSettings returns the settings of where authsvc listens and
// where its users are.
func serverSettings() []setting {
	return []setting{
		{name: "addr", arg: "ADDR", def: "127.0.0.1:8080", help: "listen address",
			field: func(c *serveConfig) any { return &c.addr }},
		{name: "users", arg: "FILE|URL", def: defaultUsersPath, help: "users file, or postgres://user:pass@host:port/db for a fleet (also for the user commands)",
			field: func(c *serveConfig) any { return &c.usersPath }},
		{name: "user-cache", arg: "N", def: 10000, help: "with PostgreSQL: users kept in memory for token checks (the ones in use)",
			field: func(c *serveConfig) any { return &c.userCache }},
	}
}

// tokenSettings returns the settings of the tokens and their store.
func tokenSettings() []setting {
	return []setting{
		{name: "token-ttl", arg: "DURATION", def: 24 * time.Hour, help: "token lifetime; 0 = never expires",
			field: func(c *serveConfig) any { return &c.tokenTTL }},
		{name: "token-idle", arg: "DURATION", def: time.Duration(0), help: "a token unused this long dies; 0 = no idle limit",
			field: func(c *serveConfig) any { return &c.tokenIdle }},
		{name: "pat-max-ttl", arg: "DURATION", def: httpapi.DefaultPATMaxTTL, help: "the longest a personal access token may live",
			field: func(c *serveConfig) any { return &c.patMaxTTL }},
		{name: "store", arg: "STORE", def: "memory", help: "token store: " + storeForms,
			field: func(c *serveConfig) any { return &c.store }},
		{name: "store-prefix", arg: "PREFIX", def: redisstore.DefaultPrefix, help: "key prefix in a shared Redis",
			field: func(c *serveConfig) any { return &c.storePrefix }},
		{name: "store-cache", arg: "N", def: redisstore.DefaultCacheSize, help: "with Redis: tokens each instance keeps after checking them, told of revocations by Redis pub/sub; 0 = every check asks Redis",
			field: func(c *serveConfig) any { return &c.storeCache }},
		{name: "max-tokens-per-user", arg: "N", def: 100, help: "live tokens per user; a new login evicts the oldest; 0 = no limit",
			field: func(c *serveConfig) any { return &c.maxPerUser }},
	}
}

// httpSettings returns the settings of reloads, logs, metrics and the
// HTTP side: browsers, connections, proxies.
func httpSettings() []setting {
	return []setting{
		{name: "reload-interval", arg: "DURATION", def: time.Second, help: "how often the users file is checked for changes",
			field: func(c *serveConfig) any { return &c.reloadInterval }},
		{name: "log-format", arg: "FORMAT", def: "text", help: "text or json",
			field: func(c *serveConfig) any { return &c.logFormat }},
		{name: "access-log", def: true, help: "one log line per request; false keeps only audit and error lines",
			field: func(c *serveConfig) any { return &c.accessLog }},
		{name: "metrics-addr", arg: "ADDR", help: "serve /metrics on this address instead of --addr, with the mail delivery counters that /metrics on --addr leaves out",
			field: func(c *serveConfig) any { return &c.metricsAddr }},
		{name: "cors-origin", arg: "ORIGIN", help: "origin whose pages may call the API, e.g. https://app.example.com; repeatable",
			field: func(c *serveConfig) any { return &c.corsRaw }},
		{name: "max-conns", arg: "N", def: 0, help: "open connections at most; at the limit the longest-idle one is closed for a new client; 0 = sized from RLIMIT_NOFILE",
			field: func(c *serveConfig) any { return &c.maxConns }},
		{name: "trusted-proxy", arg: "CIDR", help: "CIDR of a proxy whose X-Forwarded-For is believed; repeatable",
			field: func(c *serveConfig) any { return &c.trustedRaw }},
	}
}

// secretSettings returns the settings of the secret key that seals
// second factors, and of the enrolment.
func secretSettings() []setting {
	return []setting{
		{name: "secret-key-file", arg: "FILE", def: "", defText: "authsvc.key beside a users file", help: "the secret key that seals second factors (64 hex characters; created with mode 0600 when missing beside a users file that holds no second factor, never replaced); with PostgreSQL none unless given, and enrolment answers 503",
			field: func(c *serveConfig) any { return &c.secretKeyFile }},
		{name: "old-secret-key-file", arg: "FILE", help: "a key the secret key replaced, still opening what it sealed (key rotation); repeatable",
			field: func(c *serveConfig) any { return &c.oldSecretKeyFile }},
		{name: "mfa-issuer", arg: "NAME", def: "authsvc", help: "the issuer an authenticator app shows for an enrolment",
			field: func(c *serveConfig) any { return &c.mfaIssuer }},
		{name: "require-mfa", arg: "POLICY", def: "none", help: requireMFAHelp + " (user list takes it too)",
			field: func(c *serveConfig) any { return &c.requireMFARaw }},
	}
}

// throttleSettings returns the settings of the login throttle, at
// throttle.DefaultConfig's defaults.
func throttleSettings() []setting {
	th := throttle.DefaultConfig()
	return []setting{
		{section: sectionThrottle, name: "login-failures", arg: "N", def: th.PairFailures, help: "failed logins per (username, client) before backoff",
			field: func(c *serveConfig) any { return &c.throttle.PairFailures }},
		{section: sectionThrottle, name: "login-backoff", arg: "DURATION", def: th.BaseBackoff, help: "first backoff; doubles with each further failure",
			field: func(c *serveConfig) any { return &c.throttle.BaseBackoff }},
		{section: sectionThrottle, name: "login-max-backoff", arg: "DURATION", def: th.MaxBackoff, help: "backoff cap",
			field: func(c *serveConfig) any { return &c.throttle.MaxBackoff }},
		{section: sectionThrottle, name: "login-window", arg: "DURATION", def: th.Window, help: "a failure streak is forgotten after this long without a failure",
			field: func(c *serveConfig) any { return &c.throttle.Window }},
		{section: sectionThrottle, name: "user-failures", arg: "N", def: th.UserFailures, help: "failed logins per username over all clients before it is refused everywhere",
			field: func(c *serveConfig) any { return &c.throttle.UserFailures }},
		{section: sectionThrottle, name: "login-rate", arg: "R", def: th.AddrRate, help: "failed logins per second per client address, over all usernames (token bucket; successful logins never count)",
			field: func(c *serveConfig) any { return &c.throttle.AddrRate }},
		{section: sectionThrottle, name: "login-burst", arg: "N", def: th.AddrBurst, help: "bucket depth",
			field: func(c *serveConfig) any { return &c.throttle.AddrBurst }},
		{section: sectionThrottle, name: "throttle-entries", arg: "N", def: th.MaxEntries, help: "cap on each throttle table (least recently used evicted)",
			field: func(c *serveConfig) any { return &c.throttle.MaxEntries }},
	}
}

// hashingSettings returns the settings of password checking. A
// function, not a variable: the defaults of slots follow GOMAXPROCS at
// the time of the call.
func hashingSettings() []setting {
	slots := runtime.GOMAXPROCS(0)
	return []setting{
		{section: sectionHashing, name: "hash", arg: "SCHEME", def: "", defText: "argon2id", help: "hash policy for new hashes (password changes, rehash on login): argon2id (m=19 MiB, t=2, p=1) or bcrypt",
			field: func(c *serveConfig) any { return &c.hashing.scheme }},
		{section: sectionHashing, name: "cost", arg: "C", def: 0, defText: strconv.Itoa(password.DefaultBcryptCost),
			help:  fmt.Sprintf("bcrypt's cost, %d-%d; --cost alone means --hash bcrypt", password.MinBcryptCost, password.MaxBcryptCost),
			field: func(c *serveConfig) any { return &c.hashing.cost }},
		{section: sectionHashing, name: "password-min-length", arg: "N", def: password.DefaultMinLength, help: "shortest new password, in characters (user add and passwd take it too)",
			field: func(c *serveConfig) any { return &c.passwordMinLength }},
		{section: sectionHashing, name: "password-slots", was: "bcrypt-slots", arg: "N", def: slots, defText: "GOMAXPROCS", help: "password checks running at once",
			field: func(c *serveConfig) any { return &c.passwordSlots }},
		{section: sectionHashing, name: "password-queue", was: "bcrypt-queue", arg: "N", def: 4 * slots, defText: "4 × slots", help: "password checks waiting for a slot; beyond it 503 at once",
			field: func(c *serveConfig) any { return &c.passwordQueue }},
		{section: sectionHashing, name: "password-wait", was: "bcrypt-wait", arg: "DURATION", def: 2 * time.Second, help: "longest wait for a slot before 503",
			field: func(c *serveConfig) any { return &c.passwordWait }},
		// 30 s: a worker's start adds about 20 ms to the first login after
		// the pause (make bench), once per idle period at most, while an
		// idle worker still holds 6-15 MB per slot (internal/password/pool.go).
		{section: sectionHashing, name: "hash-worker-idle", arg: "DURATION", def: 30 * time.Second, help: "stop a hash worker process idle this long, to return its memory; the next check starts one again; 0 = never",
			field: func(c *serveConfig) any { return &c.passwordIdle }},
		{section: sectionHashing, name: "refusal-delay", arg: "DURATION", def: 250 * time.Millisecond, help: "hold a refused login (429, or 503 at capacity) this long before replying; 0 = at once",
			field: func(c *serveConfig) any { return &c.refusalDelay }},
	}
}

// resetSettings returns the settings of password reset links and of the
// mail that sends them.
func resetSettings() []setting {
	return []setting{
		{section: sectionReset, name: "reset-url", arg: "PATTERN", def: defaultResetURL, help: "a reset link: {uid} and {token} filled in, e.g. https://app.example.com/reset/{uid}/{token} (user reset-link takes it too)",
			field: func(c *serveConfig) any { return &c.resetURL }},
		{section: sectionReset, name: "reset-ttl", arg: "DURATION", def: users.DefaultResetTTL, help: "how long a reset link works",
			field: func(c *serveConfig) any { return &c.resetTTL }},
		{section: sectionReset, name: "smtp-url", arg: "URL", help: "mail reset links through smtp://[user:pass@]host:port (STARTTLS; ?starttls=false for a local relay) or smtps://[user:pass@]host:port; without it POST /api/auth/password/reset/ answers 404",
			field: func(c *serveConfig) any { return &c.smtpURL }},
		{section: sectionReset, name: "mail-from", arg: "ADDRESS", help: "the From address of reset mail (required with --smtp-url)",
			field: func(c *serveConfig) any { return &c.mailFrom }},
		{section: sectionReset, name: "reset-mail-template", arg: "FILE", def: "", defText: "built in", help: "a Go text/template of the reset mail, given .Username, .Name, .URL and .Expires",
			field: func(c *serveConfig) any { return &c.resetMailTemplate }},
	}
}

// defaultText is s's default as --help and the README show it.
func (s setting) defaultText() string {
	switch d := s.def.(type) {
	case nil:
		return "none"
	case time.Duration:
		return shortDuration(d)
	default:
		if s.defText != "" {
			return s.defText
		}
		return fmt.Sprint(d)
	}
}

// shortDuration formats d as a person writes it: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// define adds s to fs, bound to its field of c and set to its default.
func (s setting) define(fs *flag.FlagSet, c *serveConfig) {
	switch p := s.field(c).(type) {
	case *string:
		def, _ := s.def.(string)
		fs.StringVar(p, s.name, def, s.help)
	case *int:
		fs.IntVar(p, s.name, s.def.(int), s.help)
	case *float64:
		fs.Float64Var(p, s.name, s.def.(float64), s.help)
	case *bool:
		fs.BoolVar(p, s.name, s.def.(bool), s.help)
	case *time.Duration:
		fs.DurationVar(p, s.name, s.def.(time.Duration), s.help)
	case *stringList:
		fs.Var(p, s.name, s.help)
	default:
		panic(fmt.Sprintf("setting %s: field of unsupported type %T", s.name, p))
	}
}

// serveFlagSet defines every serve setting on c, each former name as an
// alias that sets the same field and is noted in c.deprecated.
func serveFlagSet(c *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	for _, s := range serveSettings() {
		s.define(fs, c)
		if s.was != "" {
			fs.Var(&deprecatedFlag{Value: fs.Lookup(s.name).Value, name: s.name, was: s.was, c: c}, s.was, "deprecated: use --"+s.name)
		}
	}
	return fs
}

// A deprecatedFlag is a setting's former name: it sets the setting and
// notes that the former name was used.
type deprecatedFlag struct {
	flag.Value
	name, was string
	c         *serveConfig
	set       bool // given on the command line: the new name's variable does not override it
}

// Get returns the setting's value, so that the flag's type is the setting's.
func (f *deprecatedFlag) Get() any {
	if g, ok := f.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

func (f *deprecatedFlag) Set(v string) error {
	f.set = true
	f.c.deprecated = append(f.c.deprecated, fmt.Sprintf("--%s is deprecated; use --%s", f.was, f.name))
	return f.Value.Set(v)
}

// IsBoolFlag tells the flag package whether the flag takes no value, as the
// setting it stands for does.
func (f *deprecatedFlag) IsBoolFlag() bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// defaultServeConfig is serve's configuration with every setting at its default.
func defaultServeConfig() serveConfig {
	c, err := parseServeFlags(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		panic("the default serve settings do not parse: " + err.Error())
	}
	return c
}

// serveHelp is authsvc serve --help.
var serveHelp = help{
	synopsis: "authsvc [serve] [flags]",
	about: `Runs the server until SIGINT or SIGTERM, then lets requests in flight
finish. The first start of an installation creates the users file (or
fills an empty database) with the admin user "admin" and prints its
password once on stderr. SIGHUP reloads the users file. Each flag's
default comes from the AUTHSVC_* variable named beside it; a flag given
on the command line wins.`,
	flags: writeServeUsage,
}

// writeServeUsage lists serve's flags, one line per setting, by section.
func writeServeUsage(w io.Writer) {
	section := ""
	for _, s := range serveSettings() {
		if s.section != section {
			section = s.section
			fmt.Fprintf(w, "  %s:\n", section)
		}
		flagText := "--" + s.name
		if s.arg != "" {
			flagText += " " + s.arg
		}
		fmt.Fprintf(w, "    %-29s %s (default %s; env %s)\n", flagText, s.help, s.defaultText(), envName(s.name))
	}
}

// serveEnv returns how serve's flags read their AUTHSVC_* variables, and
// the flags that take a default from one: every flag of fs but the former
// names. A former name's variable stands in for its new one, which wins; a
// former name on the command line wins over either, and its variable, when
// read, is noted in c.deprecated.
func serveEnv(fs *flag.FlagSet, c *serveConfig, getenv func(string) string) (env func(string) string, fromEnv []string) {
	renamed := make(map[string]*deprecatedFlag) // by the new name's variable
	fs.VisitAll(func(f *flag.Flag) {
		if d, ok := f.Value.(*deprecatedFlag); ok {
			renamed[envName(d.name)] = d
			return
		}
		fromEnv = append(fromEnv, f.Name)
	})
	env = func(name string) string {
		d, ok := renamed[name]
		if !ok {
			return getenv(name)
		}
		onCommandLine := d.set
		fs.Visit(func(f *flag.Flag) { onCommandLine = onCommandLine || f.Name == d.name })
		if onCommandLine {
			return ""
		}
		if v := getenv(name); v != "" {
			return v
		}
		v := getenv(envName(d.was))
		if v != "" {
			c.deprecated = append(c.deprecated, fmt.Sprintf("%s is deprecated; use %s", envName(d.was), name))
		}
		return v
	}
	return env, fromEnv
}

// parseServeFlags parses serve's command line, with every setting's
// AUTHSVC_* variable as its default, and checks the values.
func parseServeFlags(args []string, getenv func(string) string, stdout io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := serveFlagSet(&c)
	env, fromEnv := serveEnv(fs, &c, getenv)
	if err := parseFlags(fs, serveHelp, args, env, fromEnv, stdout); err != nil {
		return c, err
	}
	t := &c.throttle
	var err error
	if c.trustedProxies, err = parsePrefixes(c.trustedRaw); err != nil {
		return c, err
	}
	if c.corsOrigins, err = normalizeOrigins(c.corsRaw); err != nil {
		return c, err
	}
	if c.hashPolicy, err = c.hashing.policy("serve"); err != nil {
		return c, err
	}
	if c.requireMFA, err = parseRequireMFA("serve", c.requireMFARaw); err != nil {
		return c, err
	}
	switch {
	case t.PairFailures < 1 || t.UserFailures < 1 || t.AddrBurst < 1 || t.MaxEntries < 1:
		return c, usagef("serve: --login-failures, --user-failures, --login-burst and --throttle-entries must be at least 1")
	case t.Window <= 0 || t.BaseBackoff <= 0 || t.MaxBackoff <= 0 || t.AddrRate <= 0:
		return c, usagef("serve: --login-window, --login-backoff, --login-max-backoff and --login-rate must be positive")
	case c.refusalDelay < 0:
		return c, usagef("serve: --refusal-delay must not be negative")
	case c.passwordSlots < 1 || c.passwordQueue < 0 || c.passwordWait <= 0:
		return c, usagef("serve: --password-slots must be at least 1, --password-queue not negative, --password-wait positive")
	case c.passwordIdle < 0:
		return c, usagef("serve: --hash-worker-idle must not be negative")
	case fs.NArg() > 0:
		return c, usagef("serve: unexpected argument %q", fs.Arg(0))
	case c.tokenTTL < 0:
		return c, usagef("serve: --token-ttl must not be negative")
	case c.tokenIdle < 0:
		return c, usagef("serve: --token-idle must not be negative")
	case c.patMaxTTL <= 0:
		return c, usagef("serve: --pat-max-ttl must be positive")
	case c.passwordMinLength < 1 || c.passwordMinLength > password.MaxLen:
		return c, usagef("serve: --password-min-length must be 1 to %d", password.MaxLen)
	case c.userCache < 1:
		return c, usagef("serve: --user-cache must be at least 1")
	case c.storeCache < 0:
		return c, usagef("serve: --store-cache must not be negative")
	case c.maxConns < 0:
		return c, usagef("serve: --max-conns must not be negative")
	case c.maxPerUser < 0:
		return c, usagef("serve: --max-tokens-per-user must not be negative")
	case c.reloadInterval <= 0:
		return c, usagef("serve: --reload-interval must be positive")
	case c.mfaIssuer == "" || len(c.mfaIssuer) > 100 || strings.ContainsAny(c.mfaIssuer, ":\x00"):
		return c, usagef("serve: --mfa-issuer must be 1 to 100 bytes, without a colon")
	case c.logFormat != "text" && c.logFormat != "json":
		return c, usagef("serve: --log-format must be text or json")
	}
	if err := c.checkMetricsAddr(); err != nil {
		return c, err
	}
	return c, c.checkReset()
}

// checkMetricsAddr checks --metrics-addr, when given: a host (or none,
// for every interface) and a port number, not --addr's own. Checked at
// start, not at the listen, so that a typo stops serve with one usage
// line before anything is opened, like any other bad flag.
func (c *serveConfig) checkMetricsAddr() error {
	if c.metricsAddr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.metricsAddr)
	if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || strings.ContainsAny(host, " \t/") {
		return usagef("serve: --metrics-addr %q: want host:port, e.g. 127.0.0.1:9090", c.metricsAddr)
	}
	if c.metricsAddr == c.addr && port != "0" {
		return usagef("serve: --metrics-addr %q is --addr's: give the metrics a listener of their own", c.metricsAddr)
	}
	return nil
}

// checkReset checks the settings of reset links and their mail. No
// message quotes --smtp-url: it may hold the SMTP password.
func (c *serveConfig) checkReset() error {
	if err := checkResetURL("serve", c.resetURL); err != nil {
		return err
	}
	if c.resetTTL <= 0 {
		return usagef("serve: --reset-ttl must be positive")
	}
	if c.smtpURL == "" {
		return nil
	}
	if err := checkSMTPURL(c.smtpURL); err != nil {
		return err
	}
	if c.mailFrom == "" {
		return usagef("serve: --mail-from is required with --smtp-url")
	}
	if a, err := mail.ParseAddress(c.mailFrom); err != nil || a.Address == "" {
		return usagef("serve: --mail-from %q: want an email address, e.g. authsvc@example.com or \"Example\" <authsvc@example.com>", c.mailFrom)
	}
	return nil
}

// checkSMTPURL returns a usage error unless s is an --smtp-url of a form
// API.md gives. The error never quotes s, nor url.Parse's error, which
// does.
func checkSMTPURL(s string) error {
	bad := usagef("serve: --smtp-url: want smtp://[user:pass@]host:port[?starttls=false] or smtps://[user:pass@]host:port")
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" || u.Port() == "" || u.Path != "" && u.Path != "/" || u.Opaque != "" || u.Fragment != "" {
		return bad
	}
	q := u.Query()
	switch {
	case u.Scheme == "smtps" && len(q) == 0:
		return nil
	case u.Scheme != "smtp":
		return bad
	case len(q) == 0:
		return nil
	case len(q) == 1 && len(q["starttls"]) == 1 && (q.Get("starttls") == "false" || q.Get("starttls") == "true"):
		return nil
	}
	return bad
}
