// Package faults holds the process-level tests of what the servers stand
// on and what is thrown at them: the fault suite (fault*_test.go) kills,
// stops and fills the servers, Redis, Sentinel and PostgreSQL under load;
// hupstorm, abuse, revocation, deadtoken, storecheck and storesentinel
// check one behaviour under that stress; hygiene and slowhash check the
// files and hashes the command line leaves. The helpers they share with
// the other process-level packages are in integration/harness, whose
// Main is TestMain. It has no code outside its tests.
package faults
