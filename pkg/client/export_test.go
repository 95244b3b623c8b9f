package client

// Rendezvous is the fallback choice, for the external tests' benchmarks.
var Rendezvous = rendezvous
