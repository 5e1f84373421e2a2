// Package integration holds process-level tests: they build the authsvc
// binary once and drive real fleets of it (serve and the user commands as
// processes) over HTTP, against real Redis, Redis Cluster and PostgreSQL
// servers started by internal/testservers. It has no code outside its
// tests; it lives apart from the root package so that its walks run in
// parallel with the root package's long suite.
package integration
