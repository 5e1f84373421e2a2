// Package postgres implements users.Directory on PostgreSQL, for a fleet
// of servers sharing one set of users: a bounded cache of the users in use,
// kept fresh by LISTEN/NOTIFY and a change log, and writes serialized by
// the database.
//
// It knows the users contract and nothing of tokens or HTTP.
package postgres
