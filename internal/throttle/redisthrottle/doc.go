// Package redisthrottle implements throttle.Throttle in Redis, so that a
// fleet sharing one Redis allows as many guesses as one server.
//
// It is given a client (redisstore.Dial makes one) and knows nothing of
// the token store that may share it.
package redisthrottle
