package index

import (
	"context"
	"database/sql"
	"strings"
)

// bulk batches rows into multi-row INSERT statements: fewer statement
// executions per row is most of what makes the sink fast. Statements run
// through Query, not Exec: go-sqlite3 then binds every argument and steps
// in one cgo call instead of one call per argument. Rows go in statements
// of a power-of-two size (chunk, then 32, 16, ... for the rest of a batch),
// so the connection's statement cache (_stmt_cache_size) holds every
// statement the sink runs and nothing is prepared twice.
type bulk struct {
	tx      *sql.Tx
	head    string
	cols    int
	chunk   int // a power of two
	args    []any
	n       int
	queries map[int]string
}

func newBulk(tx *sql.Tx, head string, cols, chunk int) *bulk {
	return &bulk{tx: tx, head: head, cols: cols, chunk: chunk, args: make([]any, 0, cols*chunk), queries: map[int]string{}}
}

func (b *bulk) table() string {
	f := strings.Fields(b.head)
	if len(f) > 2 {
		return f[2]
	}
	return b.head
}

func (b *bulk) query(n int) string {
	if q, ok := b.queries[n]; ok {
		return q
	}
	var q strings.Builder
	q.Grow(len(b.head) + n*(b.cols*2+3))
	q.WriteString(b.head)
	for i := 0; i < n; i++ {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('(')
		for c := 0; c < b.cols; c++ {
			if c > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
		}
		q.WriteByte(')')
	}
	b.queries[n] = q.String()
	return b.queries[n]
}

// add queues one row. An int is passed on as an int64, a driver.Value:
// database/sql converts any other type by reflection, argument by argument.
func (b *bulk) add(ctx context.Context, vals ...any) error {
	for _, v := range vals {
		if n, ok := v.(int); ok {
			v = int64(n) // free for 0-255, which most of them are
		}
		b.args = append(b.args, v)
	}
	b.n++
	if b.n < b.chunk {
		return nil
	}
	return b.flush(ctx)
}

func (b *bulk) flush(ctx context.Context) error {
	var err error
	for off := 0; off < b.n && err == nil; {
		size := b.chunk
		for size > b.n-off {
			size /= 2
		}
		var rows *sql.Rows
		rows, err = b.tx.QueryContext(ctx, b.query(size), b.args[off*b.cols:(off+size)*b.cols]...)
		if err == nil {
			err = rows.Close()
		}
		off += size
	}
	clear(b.args)
	b.args = b.args[:0]
	b.n = 0
	return err
}

func (b *bulk) close() {}
