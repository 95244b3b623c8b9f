// Package auth is who may call the daemon: the tokens file and its
// principals, authentication by bearer token or client certificate,
// authorization by an explicit method table, instance bindings, and the
// listeners' TLS, each reloaded from disk when it changes. The gRPC layer
// (package server) calls it through its interceptors; nothing here starts
// a server.
//
// # Roles
//
// A principal (one identity of the tokens file) holds a set of roles:
//
//	gateway        PickService.Pick, PickService.ReportOutcome
//	instance       LoadService.ReportLoad and ReportLoadBatch, every report
//	               inside the identity's binding
//	operator-read  the AdminService methods that only read (Get*, List*)
//	operator       every AdminService method; implies operator-read
//
// Health checks are open to everyone, with or without credentials (load
// balancers and probes); server reflection is open to every
// authenticated identity. Which method needs what is the table in
// methods.go (RuleFor), one line per method of every service the daemon
// serves; a method missing from it is refused to everybody with
// PermissionDenied, and the tests of package server fail on any
// registered method the table lacks.
//
// A call that carries an authorization header is authenticated by it
// ("Bearer <token>"; a malformed or unknown token is Unauthenticated even
// when a good certificate was sent too); otherwise by a client certificate
// the TLS handshake verified against --tls-client-ca; otherwise it is
// Unauthenticated. A principal without the method's role, a certificate
// that maps to no identity or to two, and a report outside the binding are
// PermissionDenied, with a message naming the identity, how it was proved
// ("token", "cert"), its roles or binding, and what was needed.
//
// # The tokens file
//
// This is the one specification of the --tokens-file format; SECURITY.md
// shows an example. The file is YAML (JSON is YAML too) of at most 16 MiB
// (maxTokensFileBytes), and must not be world-writable. Its one key is
// identities, a list of:
//
//	name          1 to 128 bytes of letters, digits and ._@:/+-, unique;
//	              what logs and audit.log call the identity
//	roles         one role or a list, among gateway, instance,
//	              operator-read, operator; at least one
//	token_sha256  one or a list (several during a rotation): the lowercase
//	              or uppercase hex SHA-256 of a bearer token (HashToken,
//	              "prefixrouted hash-token"), never the token; unique
//	              across identities
//	cert          one or a list of client-certificate names that prove the
//	              identity: dns:NAME (case-insensitive), uri:URI,
//	              email:ADDRESS, ip:ADDRESS (SANs) or cn:NAME (the subject
//	              common name); unique across identities
//	bind          for identities with role instance only: {pool: P,
//	              deployment: D, instance_id: I}, pool required; the
//	              identity may only report for that pool (deployment,
//	              instance)
//	flow          for identities with role gateway only: {flow_id: F,
//	              max_priority: N}, at least one of them; the picks the
//	              identity makes are queued under flow F whatever their
//	              flow_id, and at priority N at most (a higher one is
//	              lowered to N); see docs/flow-control.md
//
// An identity needs token_sha256 or cert (else nothing can prove it).
// Unknown keys are errors; an empty file is valid and lets nobody in. A
// certificate whose names map to two identities proves neither. Every
// error names the file, the identity's index and name, and the mistake.
// Bindings are checked on every report of a stream: fields a later report
// leaves empty mean "unchanged" and were checked on the first.
//
// # Reloads
//
// The tokens file and the TLS files (certificate, key, client CA) are
// checked for a change of modification time, size or inode (a Kubernetes
// secret update swaps a symlink) at most every reload interval
// (DefaultReloadInterval, 2 s), lazily: by the first call or handshake that
// finds the interval passed. A change is loaded and used by every call or
// handshake after it; open connections keep their TLS. A load that fails
// (a file half written, a certificate written before its key) is logged,
// keeps the value in force, and is retried at every later check until one
// succeeds. The first load, at start, must succeed. ReloadStats counts the
// checks, reloads and failures.
//
// Everything here is safe for concurrent use.
package auth
