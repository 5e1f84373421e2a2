// Package throttletest is the conformance suite of throttle.Throttle: Run
// drives a throttle through the rules with fixed clocks and checks every
// answer, and every implementation runs it unchanged.
package throttletest
