package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"authsvc/internal/password"
	"authsvc/internal/users"

	"golang.org/x/term"
)

// minSafeCost is the lowest bcrypt cost used without a warning.
const minSafeCost = 10

// passwordsHelp is what the commands that take a new password say of it.
const passwordsHelp = `The password is read from stdin: on a terminal, without echo and twice;
otherwise the first line. It is never a flag. New hashes are argon2id
(m=19 MiB, t=2, p=1) unless --hash bcrypt or --cost C (bcrypt at cost C).
A new password needs --password-min-length characters or more, and must
not be the username or a common password.`

// passwordFlags are the flags of a user command that sets a new password:
// the hash policy (--hash, --cost) and the password policy
// (--password-min-length).
type passwordFlags struct {
	hashing   hashFlags
	minLength int
}

// newPasswordFlags adds the flags of a new password to f, and to its help
// how the password is read.
func newPasswordFlags(f *userFlags) *passwordFlags {
	p := new(passwordFlags)
	p.hashing.define(f.FlagSet)
	f.IntVar(&p.minLength, "password-min-length", password.DefaultMinLength, "the shortest new password, in `N` characters")
	f.fromEnv = append(f.fromEnv, "password-min-length")
	f.help.about += "\n\n" + passwordsHelp
	f.checks = append(f.checks, func() error {
		if p.minLength < 1 || p.minLength > password.MaxLen {
			return usagef("%s: --password-min-length %d: want 1 to %d", f.Name(), p.minLength, password.MaxLen)
		}
		return nil
	})
	return p
}

// read reads the new password of username from stdin, checks it against
// the password policy and returns its hash under the hash policy; cmd
// names the command in a usage error.
func (p *passwordFlags) read(cmd, username string, e *env) (string, error) {
	policy, err := p.hashing.policy(cmd)
	if err != nil {
		return "", err
	}
	pw, err := readPassword(e.stdin, e.stderr)
	if err != nil {
		return "", err
	}
	if err := users.CheckNewPassword(pw); err != nil {
		return "", err
	}
	if err := (password.Policy{MinLength: p.minLength}).Check(username, pw); err != nil {
		return "", err
	}
	return hashPassword(policy, pw, e.stderr)
}

// hashPassword returns password's hash under policy, warning on stderr of
// a bcrypt cost fit only for tests.
func hashPassword(policy password.HashPolicy, pw string, stderr io.Writer) (string, error) {
	if err := users.CheckNewPassword(pw); err != nil {
		return "", err
	}
	if policy.Scheme == password.SchemeBcrypt && policy.BcryptCost < minSafeCost {
		fmt.Fprintf(stderr, "authsvc: warning: bcrypt cost %d is below %d; use it only for tests\n", policy.BcryptCost, minSafeCost)
	}
	return policy.Hash([]byte(pw))
}

// readPassword reads a password: from a terminal without echo, asking
// twice; from anything else, the first line, silently.
func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, "Password: ")
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprint(stderr, "Password again: ")
		second, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", err
		}
		if string(first) != string(second) {
			return "", errors.New("the passwords differ")
		}
		return string(first), nil
	}
	// One byte more than a line may hold reveals an over-long password.
	line, err := bufio.NewReader(io.LimitReader(stdin, password.MaxLen+3)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	return line, nil
}
