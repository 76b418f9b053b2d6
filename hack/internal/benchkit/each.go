package benchkit

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// Each runs f for 0..n-1 on workers goroutines, each call paced by
// limiter; f gets the time its request left. It returns the first error
// of f, or the context's.
func Each(ctx context.Context, workers, n int, limiter flowcontrol.RateLimiter, f func(ctx context.Context, i int, sent time.Time) error) error {
	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range jobs {
				if err := limiter.Wait(ctx); err != nil {
					return
				}
				if err := f(ctx, i, time.Now()); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}
