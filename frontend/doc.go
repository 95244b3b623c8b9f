// Package frontend is what every front end of the router depends on: the
// Picker interface (the router as a front end sees it, implemented by
// *server.Server), the Authorizer of the daemon's tokens file, the pool
// History the console shows, and Wrap, the one HTTP wrapper of every HTTP
// front end (authentication, panic recovery, the server span, the metadata
// of the failed-pick log line).
//
// The front ends live below it, each in a package of its own:
// frontend/extproc (the Envoy ext_proc endpoint picker), frontend/httproute
// (POST /v1/pick and /v1/route) and frontend/console (the operator console
// at /ui/). They import frontend, never server or daemon; the daemon
// (daemon.Start) builds them and hands them the server as a Picker.
package frontend
