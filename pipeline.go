package atomicredis

import (
	"errors"
	"fmt"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// A pipeline of script calls on one connection: the renewer's round trip
// (a batch's scripts on one server, or one primary's share on a cluster),
// all sent before any reply is read, with the NOSCRIPT fallback and WAIT

// pipeline sends pieces on c in one round trip and reads their replies,
// sending those that met NOSCRIPT again once their scripts are loaded
// (SCRIPT LOAD). With ack, WAIT follows (each time). A failure of the
// connection is the error of every piece it left unanswered.
func (e *Engine) pipeline(c *conn, pieces []piece, ack bool) {
	for i := range pieces { // a script whose hash the table lacks is loaded first
		if _, err := pieces[i].s.sha(c); err != nil {
			fail(pieces, err)
			return
		}
	}
	if err := e.send(c, pieces, ack, false); err != nil {
		fail(pieces, err)
		return
	}
	if e.receive(c, pieces, ack) == nil {
		e.again(c, pieces, ack)
	}
}

// again loads the scripts of the pieces that met NOSCRIPT, sends those
// pieces once more, and reads their replies.
func (e *Engine) again(c *conn, pieces []piece, ack bool) {
	loaded := map[*script]bool{}
	for i := range pieces {
		if p := &pieces[i]; replyIs(p.err, "NOSCRIPT") && !loaded[p.s] {
			if err := p.s.load(c); err != nil {
				fail(pieces, err)
				return
			}
			loaded[p.s] = true
		}
	}
	for i := range pieces {
		if replyIs(pieces[i].err, "NOSCRIPT") {
			if err := e.send(c, pieces, ack, true); err != nil {
				fail(pieces, err)
				return
			}
			e.receive(c, pieces, ack)
			return
		}
	}
}

// send queues the pieces' EVALSHAs (with resend, only those that met
// NOSCRIPT: they are then marked errResend) and WAIT if ack, and flushes.
func (e *Engine) send(c *conn, pieces []piece, ack, resend bool) error {
	for i := range pieces {
		p := &pieces[i]
		var err error
		switch {
		case !resend:
			err = c.Send("EVALSHA", p.s.args(p.s.hash.Load(), p.args)...)
		case replyIs(p.err, "NOSCRIPT"):
			p.reply, p.err = nil, errResend
			err = c.Send("EVALSHA", p.s.args(p.s.hash.Load(), p.args)...)
		}
		if err != nil {
			return err
		}
	}
	if ack {
		if err := c.Send("WAIT", e.replicas, e.ackTimeout.Milliseconds()); err != nil {
			return err
		}
	}
	return c.Flush()
}

// errResend marks a piece sent again, whose reply receive reads.
var errResend = errors.New("sent again")

// receive reads the replies of what send sent: every piece's the first
// time, then the resent ones'. It returns the connection's failure, which
// is then the error of every piece left unanswered.
func (e *Engine) receive(c *conn, pieces []piece, ack bool) error {
	resend := false
	for i := range pieces {
		resend = resend || pieces[i].err == errResend
	}
	for i := range pieces {
		p := &pieces[i]
		if resend && p.err != errResend {
			continue
		}
		p.reply, p.err = c.Receive()
		if _, reply := errorReply(p.err); p.err != nil && !reply {
			fail(pieces, p.err)
			if ack { // the replies read stand, unacknowledged
				for i := range pieces {
					pieces[i].short = fmt.Errorf("WAIT %d %v: %w (%w)", e.replicas, e.ackTimeout, ErrNotReplicated, p.err)
				}
			}
			return p.err
		}
	}
	if !ack {
		return nil
	}
	// WAIT's failure, whatever it is (the batch's deadline cut it off, the
	// connection broke), leaves the replies standing and unacknowledged,
	// as in call.
	acks, ackErr := redis.Int64(c.Receive())
	var short error
	switch {
	case ackErr != nil:
		short = fmt.Errorf("WAIT %d %v: %w (%w)", e.replicas, e.ackTimeout, ErrNotReplicated, ackErr)
	case acks < int64(e.replicas):
		short = fmt.Errorf("%d of %d replicas acknowledged within %v: %w", acks, e.replicas, e.ackTimeout, ErrNotReplicated)
	}
	for i := range pieces {
		pieces[i].short = short
	}
	if _, reply := errorReply(ackErr); ackErr != nil && !reply {
		return ackErr
	}
	return nil
}

// fail makes err the error of every piece without an answer.
func fail(pieces []piece, err error) {
	for i := range pieces {
		p := &pieces[i]
		if p.reply == nil && (p.err == nil || p.err == errResend || replyIs(p.err, "NOSCRIPT")) {
			p.err = err
		}
	}
}
