// Package postgres implements users.Directory on PostgreSQL, for a fleet
// of servers sharing one set of users: a bounded cache of the users in use,
// and of the personal access tokens found by digest, kept fresh by
// LISTEN/NOTIFY and a change log, and writes serialized by the database.
//
// It knows the users contract and nothing of sessions or HTTP.
package postgres
