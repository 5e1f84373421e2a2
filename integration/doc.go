// Package integration holds the tests that start processes: servers of
// the authsvc binary, which TestMain builds once, or the program run
// in-process (cli.Run), against real Redis, Sentinel, Redis Cluster and
// PostgreSQL servers started by internal/testservers, and Python and
// Chromium where a test needs them. The model-based walks (walk_test.go)
// drive real fleets; the fault suite (fault*_test.go) kills, stops and
// fills what the servers stand on; the rest check one behaviour across
// instances, stores or the command line. It has no code outside its
// tests. The repository's files (testdata/, README.md, clients/django)
// are read through fromRoot: go test runs these tests in integration/.
package integration
