// Package connlimit caps a server's open connections, closing the
// longest-idle one for a newcomer at the cap. It knows net/http's
// connection states and nothing of the API served over them.
package connlimit
