// Package cputime measures the CPU a process uses, for benchmarks that report CPU per unit of
// work: on this project's shared two-core machines wall time varies far more than CPU does.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time the process has used so far, every thread (background compactions too).
func Process() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
