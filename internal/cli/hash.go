package cli

import (
	"context"
	"flag"
	"fmt"
)

// hashCommand runs "authsvc hash": it prints the hash of the password on
// stdin, under the hash policy.
func hashCommand(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("hash", flag.ContinueOnError)
	var hashing hashFlags
	hashing.define(fs)
	h := help{synopsis: "authsvc hash [flags]", about: `Prints the hash of the password on stdin, for a users file written by hand
or by another tool. The password is read as by user add; the password
policy does not apply.`}
	if err := parseFlags(fs, h, args, e.getenv, nil, e.stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("hash: unexpected argument; the password is read from stdin")
	}
	policy, err := hashing.policy("hash")
	if err != nil {
		return err
	}
	password, err := readPassword(e.stdin, e.stderr)
	if err != nil {
		return err
	}
	hash, err := hashPassword(policy, password, e.stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, hash)
	return nil
}
