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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "smsgw: %v\n", err)
		os.Exit(1)
	}
}
