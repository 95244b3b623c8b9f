package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	checkout := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		ok      bool
		stamped string
		rev     string
		want    Info
		str     string
	}{
		{"checkout", checkout, true, "", "", Info{"(devel)", "0123456789abcdef0123", true, "go1.26.0"},
			"(devel) (revision 0123456789ab, dirty, go1.26.0)"},
		{"stamped", checkout, true, "v0.3.0-4-g0123456", "ffff", Info{"v0.3.0-4-g0123456", "0123456789abcdef0123", true, "go1.26.0"},
			"v0.3.0-4-g0123456 (revision 0123456789ab, dirty, go1.26.0)"},
		{"stamped dirty", tagged, true, "v1.2.3-dirty", "abcdef0123456789", Info{"v1.2.3-dirty", "abcdef0123456789", true, "go1.26.0"},
			"v1.2.3-dirty (revision abcdef012345, dirty, go1.26.0)"},
		{"module", tagged, true, "", "", Info{"v1.2.3", "", false, "go1.26.0"}, "v1.2.3 (go1.26.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuildInfo(tc.bi, tc.ok, tc.stamped, tc.rev)
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Fatalf("String() = %q, want %q", s, tc.str)
			}
		})
	}
	if got := fromBuildInfo(nil, false, "", ""); got.Version != "(devel)" || got.GoVersion == "" {
		t.Fatalf("no build info: %+v", got)
	}
}
