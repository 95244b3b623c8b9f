package state

import (
	"fmt"

	"github.com/prefixroute/prefixroute/scheduler"
)

// MaxCalibratedDeployments bounds the fitted models a pool keeps: 256
// deployments (a pool has a handful; a fit for a name no instance reports
// under is kept until the bound, then refused).
const MaxCalibratedDeployments = 256

// SetCalibration makes c the fitted prefill model of the pool's deployment
// named deployment for the picks from now on (scheduler.Calibration; a
// zero Version returns the deployment to the policy's prior). A
// deployment with no instance yet keeps it for when one reports. It
// refuses a c the scheduler would reject, and a new name beyond
// MaxCalibratedDeployments, with ErrInvalidName. Safe for concurrent use.
func (p *Pool) SetCalibration(deployment string, c scheduler.Calibration) error {
	if c.Version > 0 && !(c.PrefillScale >= scheduler.MinPrefillScale && c.PrefillScale <= scheduler.MaxPrefillScale &&
		(c.DoublingContextTokens == 0 || (c.DoublingContextTokens >= scheduler.MinDoublingContextTokens &&
			c.DoublingContextTokens <= scheduler.MaxDoublingContextTokens)) &&
		(c.QueueScale == 0 || (c.QueueScale >= scheduler.MinQueueScale && c.QueueScale <= scheduler.MaxQueueScale))) {
		return fmt.Errorf("%w: calibration of deployment %q out of range: prefill scale %v, doubling context %v tokens, queue scale %v",
			ErrInvalidName, deployment, c.PrefillScale, c.DoublingContextTokens, c.QueueScale)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.calib[deployment]; !ok && len(p.calib) >= MaxCalibratedDeployments {
		return fmt.Errorf("%w: pool %q already keeps calibrations of %d deployments", ErrInvalidName, p.name, MaxCalibratedDeployments)
	}
	if p.calib == nil {
		p.calib = make(map[string]scheduler.Calibration)
	}
	p.calib[deployment] = c
	for k := range p.deps {
		if p.deps[k].name == deployment {
			p.deps[k].calib = c
			// The queue correction moves the instances' standing loads
			// and max_queue_ms reasons (scheduler.StandingCalibrated).
			for i := p.dstart[k]; i < p.dstart[k+1]; i++ {
				p.syncStanding(i)
			}
		}
	}
	return nil
}

// Calibration returns the fitted prefill model the pool's picks use for
// deployment (Version 0: none). Safe for concurrent use.
func (p *Pool) Calibration(deployment string) scheduler.Calibration {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.calib[deployment]
}
