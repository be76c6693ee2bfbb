// Package sink feeds the RESULTS and DLQ streams into an index (Index, the
// SQLite store behind it) and reads the streams for the operator commands
// (ReadStream), and applies the streams' retention to what the index holds.
// It sits on the broker and the payload store.
//
//	feed := sink.New(conn, index, sink.Config{Logger: log})
//	go feed.Run(ctx)
//	cfg.Stored = func(m sink.Msg) { feed.Offer(m) } // the workers' hand-over
//
// # Sink and readers
//
// A Sink (New) indexes RESULTS and DLQ into an Index that
// keeps, with the rows and in the same transaction, a cursor per stream:
// every message up to it is indexed. Workers of the same process hand each
// outcome they stored over with its stream sequence (queue.WorkerConfig.Stored →
// Sink.Offer), so it is not delivered a second time; a sequence the stream
// holds and the sink still lacks after GapGrace (250ms) is read from the
// stream with direct gets, which any replica answers (other processes'
// outcomes, what a crash lost between the publish and the hand-over, an
// offer dropped when the sink was behind). After a restart the sink starts from the stored
// cursors. Write is called from one goroutine; a failed write is retried,
// with a growing delay, until it succeeds. After queue.RunWorkers returns in
// until-idle mode, call Sink.Idle, then cancel the sink. ReadStream
// replays a stream in order (for `pipeline results`); queue.Pending reports
// the queue's counts.
package sink
