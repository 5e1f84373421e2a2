// Package lru is a map bounded by least-recent use, for the throttle's
// tables and the PostgreSQL directory's cache. It is not safe for
// concurrent use; its owner's mutex guards it.
package lru
