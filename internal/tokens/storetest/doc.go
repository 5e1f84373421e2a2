// Package storetest is the conformance suite of tokens.Store: Run checks
// every promise of the contract against one implementation, and every
// implementation runs it unchanged.
package storetest
