// Command smsgw is the SMS one-time-passcode service.
//
//	smsgw [serve] [-config PATH] [-dev]   run the service (applies migrations first)
//	smsgw migrate [-config PATH]          apply migrations and exit
//	smsgw healthcheck [-ready]            ask the running service whether it is healthy (ready)
//	smsgw -h                              usage
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// gcPercent is the collector's target unless GOGC says otherwise. smsgw's
// live heap is small (about 11 MB: the caches and the audit queues' slots)
// and a flood of refusals allocates fast, so at Go's 100 it collected every
// 30 ms; at 200 it collects half as often with the heap still at about
// 35 MB (docs/measurements/2026-11-27-refused-path-gc.md).
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "smsgw: %v\n", err)
		os.Exit(1)
	}
}
