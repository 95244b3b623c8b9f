package agent

import (
	"errors"
	"fmt"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

// ErrRole is wrapped when the configured role (--role) contradicts the
// engine's (SGLang's engine_type label): Run fails rather than report a
// role the engine does not serve.
var ErrRole = errors.New("agent: role mismatch")

// checkRole validates Config.Role: "", both, prefill or decode.
func checkRole(role string) error {
	if _, ok := scheduler.ParseRole(role); !ok {
		return fmt.Errorf("agent: role %q: want both, prefill or decode", role)
	}
	return nil
}

// resolveRole is the role to report from the configured one (Config.Role,
// "" when unset) and the engine's (enginemetrics.Sample.Role: SGLang's
// engine_type prefill, decode or unified; "" when the page does not say,
// as vLLM's never does). The configured role wins when the engine says
// nothing; both unset is both. A contradiction is ErrRole.
func resolveRole(configured, engine string) (pb.PdRole, error) {
	cfg, _ := scheduler.ParseRole(configured) // checked by New
	eng, known := scheduler.RoleBoth, false
	switch engine {
	case "prefill":
		eng, known = scheduler.RolePrefill, true
	case "decode":
		eng, known = scheduler.RoleDecode, true
	case "unified":
		eng, known = scheduler.RoleBoth, true
	}
	switch {
	case configured != "" && known && cfg != eng:
		return 0, fmt.Errorf("%w: --role is %s, the engine's engine_type label says %s (--disaggregation-mode); fix one of them",
			ErrRole, cfg, engine)
	case configured == "" && known:
		cfg = eng
	}
	switch cfg {
	case scheduler.RolePrefill:
		return pb.PdRole_PD_ROLE_PREFILL, nil
	case scheduler.RoleDecode:
		return pb.PdRole_PD_ROLE_DECODE, nil
	}
	return pb.PdRole_PD_ROLE_UNSPECIFIED, nil
}
