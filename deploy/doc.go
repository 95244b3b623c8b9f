// Package deploy holds no code: it is the home of the deployment files
// (../Dockerfile, kubernetes/, grafana/) and of the tests that keep them
// true to the code: the binaries the Dockerfile copies are those 'make
// build' produces, the Kubernetes manifests parse and agree with each other
// and with prefixrouted's flags, and every metric the Grafana dashboard
// queries is one a running daemon exports.
package deploy
