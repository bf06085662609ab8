package memsqs

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time source of a Server. Visibility timeouts, delays, the
// deduplication window and long-poll waits all follow it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a channel that receives once d has passed on this
	// clock, and a function that stops the timer.
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// ManualClock is a clock that moves only when told to, for deterministic
// tests: timers fire during Advance. The zero value starts at the Unix epoch;
// use NewManualClock for a realistic start.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a manual clock set to start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when Advance reaches now+d.
func (c *ManualClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t.ch, func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return t.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock forward by d and fires the timers that are due,
// earliest first.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	n := 0
	for _, t := range c.timers {
		if t.at.After(c.now) {
			break
		}
		t.ch <- c.now
		n++
	}
	c.timers = append(c.timers[:0], c.timers[n:]...)
}

// Waiters returns how many timers are pending: a test can wait for a long
// poll to be parked before it advances the clock.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
