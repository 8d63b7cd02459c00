package redisbatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/redistopo"
	"smsgw/internal/testenv"
)

// Serve, once its context ends, waits for the pipeline in flight (held by a
// frozen Redis until its call's deadline) and then refuses every call.
func TestServeOwnsThePipelines(t *testing.T) {
	node := redistopo.StartSingle(t)
	const timeout = 2 * time.Second
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr, ReadTimeout: timeout, WriteTimeout: timeout,
		ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	b := New(rdb, Options{Pipelines: 1, Timeout: timeout})
	ping := redis.NewScript(`return 1`)
	if err := b.Run(context.Background(), ping, []string{"k"}).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx) }()

	node.Pause()
	defer node.Resume()
	start := time.Now()
	answered := make(chan error, 1)
	go func() { answered <- b.Run(context.Background(), ping, []string{"k"}).Err() }()
	testenv.WaitFor(t, 0, "the call's pipeline to start", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.running == 1 && len(b.queue) == 0
	})
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < timeout*3/4 {
		t.Fatalf("Serve returned %v after the call, before its pipeline's deadline (%v)", took, timeout)
	}
	b.mu.Lock()
	running := b.running
	b.mu.Unlock()
	if running != 0 {
		t.Fatalf("%d pipelines still in flight after Serve returned", running)
	}
	if err := <-answered; err == nil {
		t.Fatal("a call to a frozen Redis succeeded")
	}
	node.Resume()
	if err := b.Run(context.Background(), ping, []string{"k"}).Err(); !errors.Is(err, ErrStopped) {
		t.Fatalf("a call after Serve returned got %v, want ErrStopped", err)
	}
}
