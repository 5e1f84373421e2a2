// Package buildinfo reads what the binary knows of its own build, for
// authsvc version and the build-info metric.
package buildinfo
