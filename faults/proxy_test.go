package faults

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ackDropper is a TCP proxy between a pipeline process and nats-server
// that loses one job's ack: after the client published the result of the
// target job (HPUB pipeline.results... with its Nats-Msg-Id), the next
// chunk carrying an ack (+ACK) is not forwarded and the connection is cut,
// as a network failure between the outcome's store and the job's ack
// would. Run the worker with --concurrency 1 so that the next ack is the
// target's. Every later connection is forwarded untouched.
//
// With blackhole set the connection is not cut but goes silent instead (a
// half-open TCP connection: a dead NAT entry, a peer that lost power): the
// server's side is closed, the client's stays open and nothing it sends is
// answered, so only the client's own pings can tell.
type ackDropper struct {
	ln        net.Listener
	upstream  string
	marker    []byte
	blackhole bool
	fired     atomic.Bool
	wg        sync.WaitGroup
}

func newAckDropper(t *testing.T, upstream, target string, blackhole bool) *ackDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ackDropper{ln: ln, upstream: upstream, marker: []byte("Nats-Msg-Id: " + target + "\r\n"), blackhole: blackhole}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *ackDropper) url() string { return "nats://" + p.ln.Addr().String() }

func (p *ackDropper) accept() {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		conns.Go(func() { p.serve(c) })
	}
}

func (p *ackDropper) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	var down sync.WaitGroup
	silent := make(chan struct{})
	down.Go(func() {
		_, _ = io.Copy(client, server)
		select {
		case <-silent: // black hole: the client must find out by itself
		default:
			client.Close()
		}
	})
	defer down.Wait()
	armed := false
	var tail []byte // the end of the previous chunk, for markers split across reads
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if !p.fired.Load() {
				seen := append(tail, chunk...)
				switch {
				case !armed && bytes.Contains(seen, p.marker) && bytes.Contains(seen, []byte("HPUB pipeline.results.")):
					armed = true
				case armed && bytes.Contains(chunk, []byte("+ACK")):
					p.fired.Store(true)
					if p.blackhole {
						close(silent)
						server.Close()
						_, _ = io.Copy(io.Discard, client) // until the client gives up on it
						return
					}
					// The ack is lost with the connection: both ends see it close.
					client.Close()
					server.Close()
					return
				}
				tail = append(tail[:0], seen[max(0, len(seen)-512):]...)
			}
			if _, werr := server.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			server.Close()
			return
		}
	}
}
