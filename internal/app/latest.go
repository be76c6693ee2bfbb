package app

import (
	"context"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/tidwall/gjson"
)

// LatestFilter passes on the results of each job's latest run, in stream
// order: it holds up to batch results, asks the ledger which of them
// a later run superseded (one gathered read for all), and prints the rest.
type LatestFilter struct {
	conn  *broker.Conn
	emit  func(sink.Msg) error
	batch int // results held per ledger read
	held  []sink.Msg
	runs  []ledger.JobRun
}

// LatestBatch is the results a LatestFilter holds per ledger read.
const LatestBatch = 256

// NewLatestFilter passes to emit the results of each job's latest run, of
// those given to Add, asking conn's ledger batch results at a time.
func NewLatestFilter(conn *broker.Conn, batch int, emit func(sink.Msg) error) *LatestFilter {
	return &LatestFilter{conn: conn, batch: batch, emit: emit}
}

// Add holds m, and passes on the results held once they are a batch.
func (l *LatestFilter) Add(ctx context.Context, m sink.Msg) error {
	l.held = append(l.held, m)
	l.runs = append(l.runs, ledger.JobRun{JobID: gjson.GetBytes(m.Data, "job_id").String(), Run: int(gjson.GetBytes(m.Data, "run").Int())})
	if len(l.held) < l.batch {
		return nil
	}
	return l.Flush(ctx)
}

// Flush passes on the results held that no later run superseded.
func (l *LatestFilter) Flush(ctx context.Context) error {
	if len(l.held) == 0 {
		return nil
	}
	later, err := ledger.New(l.conn).Superseded(ctx, l.runs)
	if err != nil {
		return err
	}
	for i, m := range l.held {
		if !later[i] {
			if err := l.emit(m); err != nil {
				return err
			}
		}
	}
	clear(l.held)
	l.held, l.runs = l.held[:0], l.runs[:0]
	return nil
}
