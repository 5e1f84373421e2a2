package cli

import (
	"context"
	"flag"
	"fmt"

	"authsvc/internal/buildinfo"
)

// versionCommand runs "authsvc version": it prints the module version
// and VCS revision.
func versionCommand(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	h := help{synopsis: "authsvc version", about: "Prints the version, the VCS revision and time, and the Go release it was built with."}
	if err := parseFlags(fs, h, args, e.getenv, nil, e.stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("version: unexpected argument %q", fs.Arg(0))
	}
	b := buildinfo.Read()
	fmt.Fprintf(e.stdout, "authsvc %s, revision %s, committed %s, built with %s\n", b.Version, b.Revision, b.Time, b.GoVersion)
	return nil
}
