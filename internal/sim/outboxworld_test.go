package sim

import (
	"context"
	"errors"
	"testing"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// TestOutboxSizesAreSQSs: the outbox half's bodies are exactly the size
// drawn as SQS counts it with the relay's key, and outbox.Write draws the
// line where the world's judge does: at the limit and one byte under it
// pass, one byte over is refused.
func TestOutboxSizesAreSQSs(t *testing.T) {
	db := memdynamo.New()
	ctx := context.Background()
	if _, err := db.CreateTable(ctx, outboxschema.CreateTableInput(obTable)); err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(db, obTable)
	q := "http://sqs.us-east-1.memsqs.local/000000000000/" + q2Name
	for i, size := range []int{outbox.MaxBodyBytes - 1, outbox.MaxBodyBytes, outbox.MaxBodyBytes + 1, 4096, 4097} {
		id := "ob-" + string(rune('a'+i))
		body := obBody("q2-o0", 1001+i, "o0", id, size)
		if got := obSize("o0", id, body); got != size {
			t.Fatalf("size %d: the body counts %d", size, got)
		}
		err := ob.Write(ctx, []outbox.Message{{QueueURL: q, Group: "o0", ID: id, Body: body}})
		if over := size > outbox.MaxBodyBytes; over != errors.Is(err, outbox.ErrInvalid) {
			t.Fatalf("size %d: Write said %v", size, err)
		}
	}
}

// TestOutboxShapes: over the seeds, the outbox half is on in about a third of
// the worlds, and its messages join the workload with their relay keys.
func TestOutboxShapes(t *testing.T) {
	kinds, _ := ParseKinds("")
	ops, _ := ParseOps("")
	on, limits := 0, 0
	for seed := range uint64(200) {
		w := &world{cfg: Config{Seed: seed, Swarm: true, Kinds: kinds, Ops: ops}, byLid: map[int]*msgSpec{}, byKey: map[string]*msgSpec{}}
		w.shape = drawShape(w.cfg)
		w.workload()
		n := len(w.msgs)
		w.obWorkload()
		if !w.shape.Outbox.On {
			if len(w.msgs) != n {
				t.Fatalf("seed %d: outbox off, and messages added", seed)
			}
			continue
		}
		on++
		for _, s := range w.msgs[n:] {
			if w.ob.byKey[s.keyAttr] != s || w.byKey[s.key] != s || s.lid <= obLidBase {
				t.Fatalf("seed %d: message %d not keyed as the relay publishes it", seed, s.lid)
			}
			if obSize(s.group, w.ob.obIDOf(s), s.body) == outbox.MaxBodyBytes {
				limits++
			}
		}
	}
	if on < 45 || on > 90 {
		t.Errorf("outbox on in %d of 200 seeds", on)
	}
	if limits == 0 {
		t.Error("no message exactly at SQS's limit in 200 seeds")
	}
}
