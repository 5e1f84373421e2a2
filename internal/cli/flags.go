package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"authsvc/internal/password"
)

// A usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelpShown: --help printed the usage; the command succeeds.
var errHelpShown = errors.New("help shown")

// envName is the variable that gives flag name its default: AUTHSVC_TOKEN_TTL for token-ttl.
func envName(flagName string) string {
	return "AUTHSVC_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// A help is one command's --help: its synopsis and what it does. Its flags
// are listed from its FlagSet, or by flags (serve lists its own, in
// sections).
type help struct {
	synopsis string          // what follows "usage: "
	about    string          // what the command does, and what its flags do not say
	flags    func(io.Writer) // lists the flags; nil lists the FlagSet's
}

// write prints h for fs, whose flags named in fromEnv take AUTHSVC_*
// variables.
func (h help) write(w io.Writer, fs *flag.FlagSet, fromEnv []string) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", h.synopsis, h.about)
	if h.flags != nil {
		fmt.Fprint(w, "\nflags:\n")
		h.flags(w)
		return
	}
	type line struct{ flag, text string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if arg != "" {
			name += " " + arg
		}
		var notes []string
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" && f.DefValue != "[]" {
			notes = append(notes, "default "+f.DefValue)
		}
		if slices.Contains(fromEnv, f.Name) {
			notes = append(notes, "env "+envName(f.Name))
		}
		if len(notes) > 0 {
			text += " (" + strings.Join(notes, "; ") + ")"
		}
		lines = append(lines, line{name, text})
		width = max(width, len(name))
	})
	if len(lines) == 0 {
		return
	}
	fmt.Fprint(w, "\nflags:\n")
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s  %s\n", width, l.flag, l.text)
	}
}

// parseFlags parses args into fs. Flags named in fromEnv and absent from
// args take their value from their AUTHSVC_* variable: flags on the command
// line win, repeatable ones included. Flags may follow positional arguments.
// --help prints h to stdout and returns errHelpShown; any mistake is a
// one-line usageError, without a usage dump.
func parseFlags(fs *flag.FlagSet, h help, args []string, getenv func(string) string, fromEnv []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	explainDurations(fs)
	if err := parseArgs(fs, args, func() { h.write(stdout, fs, fromEnv) }); err != nil {
		return err
	}
	onCommandLine := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, name := range fromEnv {
		v := getenv(envName(name))
		if v == "" || onCommandLine[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usagef("%s: invalid value %q for %s: %v", fs.Name(), v, envName(name), err)
		}
	}
	return nil
}

// parseArgs parses args into fs, flags and positional arguments
// interleaved; --help calls showHelp.
func parseArgs(fs *flag.FlagSet, args []string, showHelp func()) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				showHelp()
				return errHelpShown
			}
			// The flag package names flags -x; the help and the README say --x.
			msg := invalidFlagValue.ReplaceAllString(err.Error(), "${1}for --${2}:")
			return usagef("%s: %s", fs.Name(), msg)
		}
		rest := fs.Args()
		if endedByTerminator(fs, args[:len(args)-len(rest)]) {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parse again with only the positional arguments so fs.Args returns them.
	return fs.Parse(append([]string{"--"}, positional...))
}

// invalidFlagValue matches the flag package's `invalid value "v" for flag -name:`.
var invalidFlagValue = regexp.MustCompile(`^(invalid value ".*" )for flag -([A-Za-z0-9-]+):`)

// A durationValue is a duration flag whose mistakes say what a duration
// looks like, rather than the flag package's "parse error".
type durationValue struct {
	flag.Value
	zero string // what 0 means, from the flag's help ("0 = never"); "" when nothing special
}

func (d *durationValue) Set(v string) error {
	if _, err := time.ParseDuration(v); err != nil {
		msg := "want a duration such as 24h, 90m or 1.5s"
		if d.zero != "" {
			msg += " (0 = " + d.zero + ")"
		}
		return errors.New(msg)
	}
	return d.Value.Set(v)
}

func (d *durationValue) Get() any { return d.Value.(flag.Getter).Get() }

// explainDurations makes every duration flag of fs a durationValue. What 0
// means comes from the flag's help: the text after "0 = ", to a comma.
func explainDurations(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if _, isDuration := g.(*durationValue); !ok || isDuration {
			return
		}
		if _, ok := g.Get().(time.Duration); !ok {
			return
		}
		zero := ""
		if _, after, ok := strings.Cut(f.Usage, "0 = "); ok {
			zero, _, _ = strings.Cut(after, ",")
			zero = strings.TrimSpace(zero)
		}
		f.Value = &durationValue{Value: f.Value, zero: zero}
	})
}

// endedByTerminator reports whether the flags fs.Parse consumed end with the
// terminator "--" (which Parse drops), rather than with a flag's value "--".
func endedByTerminator(fs *flag.FlagSet, consumed []string) bool {
	for i := 0; i < len(consumed); i++ {
		if consumed[i] == "--" {
			return true
		}
		name := strings.TrimPrefix(strings.TrimPrefix(consumed[i], "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // the next argument is the flag's value
			}
		}
	}
	return false
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// parsePrefixes parses --trusted-proxy values: CIDRs, or single addresses.
func parsePrefixes(values []string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if p, err := netip.ParsePrefix(s); err == nil {
				prefixes = append(prefixes, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, usagef("serve: --trusted-proxy %q: not a CIDR or an address", s)
			}
			prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return prefixes, nil
}

// normalizeOrigins checks --cors-origin values: scheme://host[:port], no path.
func normalizeOrigins(values []string) ([]string, error) {
	var origins []string
	for _, v := range values {
		for _, o := range strings.Split(v, ",") {
			o = strings.TrimSuffix(strings.TrimSpace(o), "/")
			if o == "" {
				continue
			}
			scheme, host, ok := strings.Cut(o, "://")
			if !ok || (scheme != "http" && scheme != "https") || host == "" || strings.ContainsAny(host, "/*?#") {
				return nil, usagef("serve: --cors-origin %q: want scheme://host[:port], e.g. https://app.example.com", o)
			}
			origins = append(origins, o)
		}
	}
	return origins, nil
}

// hashFlags are --hash and --cost as serve and the CLI take them: the hash
// policy for new hashes.
type hashFlags struct {
	scheme string // "argon2id" or "bcrypt"; "" when not given
	cost   int    // bcrypt's cost; 0 when not given
}

// define adds --hash and --cost to fs.
func (h *hashFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&h.scheme, "hash", "", "the hash `SCHEME` of the new hash: argon2id (the default) or bcrypt")
	fs.IntVar(&h.cost, "cost", 0, fmt.Sprintf("bcrypt's cost `C`, %d-%d (default %d); --cost alone means --hash bcrypt",
		password.MinBcryptCost, password.MaxBcryptCost, password.DefaultBcryptCost))
}

// policy resolves the flags into a hash policy (API.md "Passwords"):
// argon2id unless --hash bcrypt or --cost C alone (bcrypt at cost C);
// --hash argon2id with --cost is a usage error.
func (h hashFlags) policy(cmd string) (password.HashPolicy, error) {
	p := password.DefaultHashPolicy()
	switch h.scheme {
	case "":
		if h.cost != 0 {
			p.Scheme = password.SchemeBcrypt
		}
	case password.SchemeArgon2id:
		if h.cost != 0 {
			return p, usagef("%s: --cost is bcrypt's; it does not go with --hash argon2id", cmd)
		}
	case password.SchemeBcrypt:
		p.Scheme = password.SchemeBcrypt
	default:
		return p, usagef("%s: --hash %q: want argon2id or bcrypt", cmd, h.scheme)
	}
	if h.cost != 0 {
		if h.cost < password.MinBcryptCost || h.cost > password.MaxBcryptCost {
			return p, usagef("--cost %d: want %d to %d", h.cost, password.MinBcryptCost, password.MaxBcryptCost)
		}
		p.BcryptCost = h.cost
	}
	return p, nil
}
