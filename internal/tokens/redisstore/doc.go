// Package redisstore implements tokens.Store in Redis, for a fleet of
// servers sharing sessions, and dials the Redis client that the login
// throttle may share (Dial, DialCluster).
//
// Two stores: Store on one Redis or a primary that Sentinel manages
// (standalone.go), and ClusterStore on a Redis Cluster (cluster.go). They
// share one core (redisstore.go; its cache, cache.go), one rule that names
// their keys (keys.go), and one Lua body for each user script, run over
// each store's layout (layout.go).
//
// It stores digests only, and knows nothing of users or HTTP.
package redisstore
