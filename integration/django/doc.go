// Package django holds the process-level tests of the switch-over from
// Django: its password hash forms logging in (djangohashes, djangootp),
// user import of its dumps, tokens and twins, once and again
// (djangoimport, djangotokens, djangotwins, importupdate), the Python
// client against the built binary (pyclient), and user add run
// concurrently (concurrentadd). The helpers they share with the other
// process-level packages are in integration/harness, whose Main is
// TestMain. It has no code outside its tests.
package django
