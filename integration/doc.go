// Package integration holds the tests that start processes: servers of
// the authsvc binary, which TestMain builds once, or the program run
// in-process (cli.Run), against real Redis, Sentinel, Redis Cluster and
// PostgreSQL servers started by internal/testservers, and Chromium where
// a test needs it. The model-based walks (walk_test.go) drive real
// fleets; the rest check one behaviour across instances and stores:
// sessions, passwords and two-factor, the docs' sessions. The fault
// suite is in integration/faults, the Django switch-over in
// integration/django, and the helpers all three share in
// integration/harness. It has no code outside its tests.
package integration
