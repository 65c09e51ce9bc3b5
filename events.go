package atomicredis

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// EventType says what an Event reports.
type EventType int

const (
	EventAcquired        EventType = iota + 1 // taken; Wait: how long it took, Queued: whether it waited in the queue
	EventNotAcquired                          // not taken; Err: why, Wait: how long it tried
	EventReleased                             // given back; Held: how long it was held
	EventLost                                 // the holding is gone: its lease ran out, another took it, extensions failed (Err)
	EventExtendFailed                         // one extension failed (Err); the lease may still hold
	EventBackgroundError                      // an abandon or the wake-up machinery failed (Err)
	EventLimitDiffers                         // a semaphore's stored limit rules over the caller's Limit (Err says both)
	EventQueued                               // the acquisition joined the queue (once a call); Wait: how long it had tried
	EventDone                                 // a Hook's End of a call that neither acquired nor released: Err its error, Wait how long it took
	EventCampaign                             // a Campaign began to wait: another leads (an election's EventQueued)
	EventElected                              // a Campaign won (an election's EventAcquired): Fence the term
	EventDeposed                              // a leader lost the leadership (an election's EventLost): Err why
	EventLeaderChanged                        // an Observe call saw a new leader or value: Fence the term (0: none)
	EventExpired                              // a holding nothing extended outlived its lease unreleased (a lease left to run out), seen by the engine's pruning or Close: its end, not a loss
)

var eventNames = [...]string{"", "acquired", "not acquired", "released", "lost", "extend failed", "background error", "limit differs", "queued",
	"done", "campaign", "elected", "deposed", "leader changed", "expired"}

func (t EventType) String() string {
	if t > 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Event is one thing that happened to a lock, read-write lock hold or
// permit, as WithObserver sees it. Object is ObjectLock,
// ObjectReadWriteLock or ObjectSemaphore. Fence is zero where there is no
// holding (a refusal, a limit that differs, a call that queued, a
// background error); Token is set where a call's token is known (a
// holding, a call that queued, an abandon that failed). A background
// error of the wake-up machinery has no Object and no Name.
type Event struct {
	Type       EventType
	Object     string
	Name       string
	Token      string
	Fence      int64
	Queued     bool // the acquisition waited in the queue
	Wait, Held time.Duration
	Err        error
	Reason     string // EventLost, EventDeposed: LostExpired, LostTaken, LostClosed or LostError
}

// Why a holding was lost (Event.Reason).
const (
	LostExpired = "expired" // the server found it gone after its lease may have run out
	LostTaken   = "taken"   // the server found it gone while its lease still ran: freed (ForceUnlock) or another's
	LostClosed  = "closed"  // Engine.Close ended it
	LostError   = "error"   // extensions or a release went unanswered until the lease ran out
)

// event is an Event about o; token and fence are zero where there is no
// holding.
func (o object) event(t EventType, token string, fence int64, err error) Event {
	return Event{Type: t, Object: o.kind.noun, Name: o.name, Token: token, Fence: fence, Err: err}
}

// observe tells the observer of ev, and the hook's Observe: an event whose
// error is returned to a caller, which is the caller's to log.
func (e *Engine) observe(ev Event) {
	if e.observer == nil && e.hookObserve == nil {
		return
	}
	ev = ev.told()
	if e.observer != nil {
		e.observer(ev)
	}
	e.observed(ev)
}

// told is ev as observers are told of it: an election's acquisitions,
// queue joins and losses as its own events.
func (ev Event) told() Event {
	if ev.Object == ObjectElection {
		switch ev.Type {
		case EventAcquired:
			ev.Type = EventElected
		case EventQueued:
			ev.Type = EventCampaign
		case EventLost:
			ev.Type = EventDeposed
		}
	}
	return ev
}

// emit tells the observer and the logger of ev, something that happened
// in the background.
func (e *Engine) emit(ev Event) {
	e.observe(ev)
	if e.logger == nil {
		return
	}
	level := slog.LevelWarn
	switch ev.Type {
	case EventLost:
		level = slog.LevelError
	case EventExtendFailed, EventBackgroundError, EventLimitDiffers:
	default:
		return
	}
	e.logger.LogAttrs(context.Background(), level, "atomicredis: "+ev.Type.String(),
		slog.String("object", ev.Object), slog.String("name", ev.Name), slog.Int64("fence", ev.Fence), slog.Any("error", ev.Err))
}

// limitsRemembered bounds how many (name, stored limit) pairs an engine
// remembers having reported; past it, it forgets an arbitrary one, which
// may then be reported again.
const limitsRemembered = 1000

// storedLimit is a semaphore name and the stored limit reported for it.
type storedLimit struct {
	name  string
	limit int64
}

// limitDiffers reports, once per name and stored limit, that a semaphore's
// stored limit rules over the caller's Limit: a deploy that changed Limit
// learns why it has no effect.
func (e *Engine) limitDiffers(o object, stored, asked int64) {
	k := storedLimit{o.name, stored}
	e.limitsMu.Lock()
	_, seen := e.limits[k]
	if !seen {
		if len(e.limits) >= limitsRemembered {
			for old := range e.limits {
				delete(e.limits, old)
				break
			}
		}
		if e.limits == nil {
			e.limits = map[storedLimit]struct{}{}
		}
		e.limits[k] = struct{}{}
	}
	e.limitsMu.Unlock()
	if !seen {
		e.emit(o.event(EventLimitDiffers, "", 0, o.errorf("stored limit %d rules, not Limit %d (SetSemaphoreLimit changes it)", stored, asked)))
	}
}
