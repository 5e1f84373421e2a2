// Package tick runs a function on a ticker until a context ends: the one
// loop behind the directory's watch, the store's sweep and the log's flush.
package tick
