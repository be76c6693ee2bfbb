package broker

import (
	"math/rand/v2"
	"time"
)

// Jitter is d plus up to a fifth of it at random, so that processes
// retrying after the same failure do not retry in step.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/5+1)
}
