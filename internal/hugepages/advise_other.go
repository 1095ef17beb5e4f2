//go:build !linux

package hugepages

import "time"

// MachineMode is ModeUnknown off Linux: there is nothing to advise.
func MachineMode() Mode { return ModeUnknown }

// Advisor does nothing off Linux.
type Advisor struct{}

// NewAdvisor returns an advisor that does nothing.
func NewAdvisor() *Advisor { return &Advisor{} }

// Run returns when stop is closed.
func (a *Advisor) Run(interval time.Duration, stop <-chan struct{}, withdrawn func(stalls uint64)) {
	<-stop
}

// Advising is always false.
func (a *Advisor) Advising() bool { return false }

// Advised is always zero.
func (a *Advisor) Advised() (advised, refused int) { return 0, 0 }
