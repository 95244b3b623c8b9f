// Package buildinfo says which build of prefixroute is running: the version,
// the VCS revision and whether the tree was dirty, from the module build
// information the Go toolchain embeds (runtime/debug.ReadBuildInfo).
// 'make build' overrides the version with 'git describe --tags --always
// --dirty' through -ldflags:
//
//	-X github.com/prefixroute/prefixroute/internal/buildinfo.version=v1.2.3
//	-X github.com/prefixroute/prefixroute/internal/buildinfo.revision=<git rev-parse HEAD>
//
// (the revision too, for builds where the toolchain stamps no VCS
// information: -buildvcs=false, or a copy of the tree without .git).
//
// Everything here is safe for concurrent use.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version and revision are set by 'make build' (-ldflags -X); empty in a
// plain 'go build'.
var version, revision string

// Info is one binary's build.
type Info struct {
	Version   string // "v1.2.3", "v0.0.0-20260101-abcdef", or "(devel)"
	Revision  string // the VCS commit, "" when not built from a checkout
	Dirty     bool   // the checkout had uncommitted changes
	GoVersion string // "go1.26.0"
}

// Read returns the running binary's build.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ok, version, revision)
}

// fromBuildInfo is Read's logic: the -X version wins, then the main
// module's version, else "(devel)"; the toolchain's VCS revision wins over
// the -X one.
func fromBuildInfo(bi *debug.BuildInfo, ok bool, stamped, stampedRev string) Info {
	in := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if ok && bi != nil {
		if v := bi.Main.Version; v != "" {
			in.Version = v
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Dirty = s.Value == "true"
			}
		}
	}
	if in.Revision == "" {
		in.Revision = stampedRev
	}
	if stamped != "" {
		in.Version = stamped
		// git describe --dirty marks the tree itself.
		in.Dirty = in.Dirty || strings.HasSuffix(stamped, "-dirty")
	}
	return in
}

// ShortRevision is the revision's first 12 characters ("" when unknown).
func (in Info) ShortRevision() string {
	if len(in.Revision) > 12 {
		return in.Revision[:12]
	}
	return in.Revision
}

// String is the one-line form the --version flags print:
// "v1.2.3 (revision 0123456789ab, dirty, go1.26.0)".
func (in Info) String() string {
	parts := make([]string, 0, 3)
	if r := in.ShortRevision(); r != "" {
		parts = append(parts, "revision "+r)
	}
	if in.Dirty {
		parts = append(parts, "dirty")
	}
	parts = append(parts, in.GoVersion)
	return fmt.Sprintf("%s (%s)", in.Version, strings.Join(parts, ", "))
}
