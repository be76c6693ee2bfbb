package app

import (
	"context"
	"time"

	"github.com/llmpipeline/pipeline/internal/ctxwait"
)

// EmbeddedDedupeBudget is how many job ids a submit that hosts the
// embedded nats server in its own process lets that server remember at
// once. The server keeps an index entry for every message id stored within
// the JOBS stream's duplicate window (--duplicate-window), about 94 bytes
// of heap each and more while its map grows, and forgets each one a window
// after it was stored; nothing else bounds it. Unpaced, a submit of 1M
// lines stores them within 15 s and the index holds all of them: 226 MB
// peak RSS. At 120,000 ids the process stays under 100 MB peak RSS at any
// line count (bench/RESULTS.md, "Submit's memory"); past that many ids in
// one window, submit waits for the oldest to be forgotten, so it publishes
// at most EmbeddedDedupeBudget jobs per window. A submit that joins a
// running server (a `run` on the data dir, or --nats-url) is not paced: the
// index is in the server's process then.
const EmbeddedDedupeBudget = 120_000

// dedupeBudget is EmbeddedDedupeBudget, lowered by a test.
var dedupeBudget = EmbeddedDedupeBudget

// paceSlack is how long after an id's window ends submit counts it as
// forgotten: the server's purge timer fires at the window's end, at least
// 50 ms after its last run.
const paceSlack = 250 * time.Millisecond

// dedupePace keeps the ids a server remembers under budget: before a batch
// is published, wait returns once the batch fits beside the ids stored
// within the last window; stored records a batch when its acks are in (the
// server stored each id before it acked it, so it forgets it by then plus
// the window). It is what the server's purge does, counted on this side:
// each id is forgotten a window after it was stored. The ids a previous
// submit stored within the window, which the server indexed again when it
// started, are not counted: at most one more budget, from a submit that was
// paced as well.
type dedupePace struct {
	budget int
	window time.Duration
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	// onWait, if set, is called before the first wait.
	onWait func()

	held    int         // ids in batches, not yet forgotten
	batches []paceBatch // oldest first
}

type paceBatch struct {
	at time.Time
	n  int
}

func newDedupePace(budget int, window time.Duration, onWait func()) *dedupePace {
	return &dedupePace{budget: budget, window: window, now: time.Now, sleep: ctxwait.Sleep, onWait: onWait}
}

// wait returns once n more ids fit in the budget, or ctx's error. A batch
// larger than the budget on its own waits for every earlier one only.
func (p *dedupePace) wait(ctx context.Context, n int) error {
	for len(p.batches) > 0 && p.held+n > p.budget {
		oldest := p.batches[0]
		if d := oldest.at.Add(p.window + paceSlack).Sub(p.now()); d > 0 {
			if p.onWait != nil {
				p.onWait()
				p.onWait = nil
			}
			if err := p.sleep(ctx, d); err != nil {
				return err
			}
		}
		p.held -= oldest.n
		p.batches = p.batches[1:]
	}
	return nil
}

// stored records n ids the server acked just now.
func (p *dedupePace) stored(n int) {
	if n <= 0 {
		return
	}
	p.batches = append(p.batches, paceBatch{at: p.now(), n: n})
	p.held += n
}
