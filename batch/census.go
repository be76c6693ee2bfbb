package batch

import (
	"maps"
	"sync"
	"time"
)

// Request outcomes, as Event.Outcome names them.
const (
	OutcomeResult     = "result"      // the job ended with a result
	OutcomeDeadLetter = "dead_letter" // the job ended with a dead letter
	OutcomeHeal       = "heal"        // the answer failed validation: a heal turn follows
	OutcomeRetry      = "retry"       // the request failed inside the batch: sent again
	OutcomeRequeued   = "requeued"    // unanswered (expired, cancelled, never created): sent again
)

// Outcomes lists every Event.Outcome, so a counter can start each at 0.
func Outcomes() []string {
	return []string{OutcomeResult, OutcomeDeadLetter, OutcomeHeal, OutcomeRetry, OutcomeRequeued}
}

// Kind is what a batch is counted by: its provider, the record's state
// (StateSubmitting ... StateAbandoned) and the provider's status word
// (validating, in_progress, finalizing, completed, ended, ...; "" before
// the provider has the batch).
type Kind struct {
	Provider string
	State    string
	Status   string
}

// InFlight reports whether the batch is not settled yet: being created,
// at the provider, or having its results read.
func (k Kind) InFlight() bool {
	switch k.State {
	case StateSubmitting, StateSubmitted, StateCollecting:
		return true
	}
	return false
}

// Census is what the PIPELINE_BATCHES bucket holds, as this process last
// read it: the fleet's batches, whichever process created them.
type Census struct {
	// Batches counts the batch records by kind.
	Batches map[Kind]int
	// InBatches is the requests of the batches in flight.
	InBatches int
	// Queued is the requests waiting for a batch (heal turns, retries,
	// requeued requests).
	Queued int
	// At is when the bucket was last read whole (zero before the first
	// poll).
	At time.Time
}

// statusWord is a provider status word as counted: the words the
// providers document (OpenAI's batch object, Anthropic's
// processing_status) are kept, any other is "other", so a provider cannot
// grow the metric's label set.
func statusWord(s string) string {
	switch s {
	case "", "validating", "in_progress", "finalizing", "completed", "failed", "expired",
		"cancelling", "cancelled", "canceling", "ended":
		return s
	}
	return "other"
}

// kindOf is the kind a record is counted as.
func kindOf(rec Record) Kind {
	return Kind{Provider: rec.Provider, State: rec.State, Status: statusWord(rec.Status.Status)}
}

// seen is one record as counted: its kind, its request count and the
// revision it was read or written at.
type seen struct {
	kind     Kind
	requests int
	rev      uint64
}

// census keeps the latest count of the bucket. A poll counts every record
// it reads and replaces the count whole; between polls, and during one,
// the records this process writes update it at once, so a batch this
// process submits or settles shows without waiting for the next poll. A
// write noted during a poll wins over the poll's read when its revision is
// newer.
type census struct {
	mu       sync.Mutex
	recs     map[string]seen
	queued   int
	at       time.Time
	during   map[string]seen // written since the running poll began; nil when none runs
	counting map[string]seen // the running poll's count
	// queuedSince is what queue added since the running poll listed the
	// queue (the poll's listing misses what was queued after it).
	queuedSince int
}

// queue adds n requests to the queued count (n < 0: taken into a batch).
func (c *census) queue(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued = max(c.queued+n, 0)
	c.queuedSince += n
}

// note records a record this process read or wrote at rev.
func (c *census) note(rec Record, rev uint64) {
	s := seen{kind: kindOf(rec), requests: len(rec.Requests), rev: rev}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs == nil {
		c.recs = map[string]seen{}
	}
	if cur, ok := c.recs[rec.Key]; !ok || cur.rev <= rev {
		c.recs[rec.Key] = s
	}
	if c.during != nil {
		if cur, ok := c.during[rec.Key]; !ok || cur.rev <= rev {
			c.during[rec.Key] = s
		}
	}
}

// begin starts a poll's count (polls run one at a time).
func (c *census) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.during, c.counting, c.queuedSince = map[string]seen{}, map[string]seen{}, 0
}

// count adds a record the poll read (or left) at rev.
func (c *census) count(rec Record, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counting != nil {
		c.counting[rec.Key] = seen{kind: kindOf(rec), requests: len(rec.Requests), rev: rev}
	}
}

// end replaces the count with the poll's, keeping the newer writes made
// during it. complete is false when the poll could not list the bucket:
// the old count stays then, with the poll's reads applied.
func (c *census) end(now time.Time, queued int, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.counting
	if !complete {
		next = maps.Clone(c.recs)
		if next == nil {
			next = map[string]seen{}
		}
		for k, s := range c.counting {
			if cur, ok := next[k]; !ok || cur.rev <= s.rev {
				next[k] = s
			}
		}
	}
	for k, s := range c.during {
		if cur, ok := next[k]; !ok || cur.rev < s.rev {
			next[k] = s
		}
	}
	c.recs, c.during, c.counting = next, nil, nil
	if complete {
		c.queued, c.at = max(queued+c.queuedSince, 0), now
	}
}

func (c *census) snapshot() Census {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Census{Batches: map[Kind]int{}, Queued: c.queued, At: c.at}
	for _, s := range c.recs {
		out.Batches[s.kind]++
		if s.kind.InFlight() {
			out.InBatches += s.requests
		}
	}
	return out
}

// Census returns the fleet's batches as this process last counted them:
// the bucket is read whole at every poll (Config.Poll), and the records
// this process writes count at once. No I/O: safe to call on every
// metrics scrape or progress redraw.
func (r *Runner) Census() Census {
	return r.census.snapshot()
}
