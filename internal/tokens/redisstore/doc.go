// Package redisstore implements tokens.Store in Redis, for a fleet of
// servers sharing sessions, and dials the Redis client that the login
// throttle may share (Dial).
//
// It stores digests only, and knows nothing of users or HTTP.
package redisstore
