package latchkeyotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// A Locker's observer makes spans under the caller's span: here recorded
// in memory, where a program would export them over OTLP.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	tel, err := latchkeyotel.New(latchkeyotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	locker := memlock.New()
	locker.SetObserver(tel.LockObserver("mem"))

	ctx, charge := tp.Tracer("payments").Start(context.Background(), "charge")
	lease, err := locker.Acquire(ctx, "account-42")
	if err != nil {
		panic(err)
	}
	_ = lease.Release(ctx)
	charge.End()

	for _, s := range spans.Ended() {
		fmt.Println(s.Name())
	}
	// Output:
	// latchkey.lock
	// charge
}
