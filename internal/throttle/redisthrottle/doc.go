// Package redisthrottle implements throttle.Throttle in Redis, so that a
// fleet sharing one Redis, or one Redis Cluster, allows as many guesses as
// one server.
//
// It is given a client (redisstore.Dial makes one for a single Redis,
// redis.NewClusterClient with redisurl.ParseCluster's options one for a
// cluster) and knows nothing of the token store that may share it.
package redisthrottle
