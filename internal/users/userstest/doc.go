// Package userstest is the conformance suite of users.Directory: Run
// checks every promise of the contract against one implementation, and
// every implementation runs it unchanged.
package userstest
