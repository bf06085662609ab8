package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/operator"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// ---- Overview

type queueRow struct {
	operator.QueueInfo
	Err string
}

type outboxSummary struct {
	Table         string
	Groups, Held  int
	Messages      int
	Oldest        time.Duration
	More          bool // the page bound was reached: there may be more
	Err           string
	PageSize      int
	HeldGroupsURL string
}

type overviewData struct {
	Queues   []queueRow
	Table    operator.TableInfo
	TableErr string
	Outbox   *outboxSummary
	Rates    *rateView
}

func (c *Console) overview(r *http.Request) (string, any, error) {
	ctx := r.Context()
	d := overviewData{}
	for _, u := range c.cfg.Queues {
		qi, err := operator.DescribeQueue(ctx, c.cfg.SQS, u)
		row := queueRow{QueueInfo: qi}
		if err != nil {
			row.Err = err.Error()
		}
		d.Queues = append(d.Queues, row)
	}
	ti, err := operator.DescribeTable(ctx, c.cfg.DB, c.cfg.DedupTable)
	d.Table = ti
	if err != nil {
		d.TableErr = err.Error()
	}
	if c.cfg.OutboxTable != "" {
		s := &outboxSummary{Table: c.cfg.OutboxTable, PageSize: c.cfg.PageSize}
		groups, err := c.pendingGroups(r)
		if err != nil {
			s.Err = err.Error()
		}
		for _, g := range groups {
			s.Groups++
			s.Messages += len(g.Items)
			if g.Held != "" {
				s.Held++
			}
			s.Oldest = max(s.Oldest, g.Age)
		}
		s.More = s.Messages >= c.cfg.PageSize
		d.Outbox = s
	}
	if c.rates != nil {
		d.Rates = c.rates.view()
	}
	return "overview", d, nil
}

// ---- Find a message

type findData struct {
	Form   map[string]string
	Queues []string
	Key    string
	Record *dedup.Record
	Where  operator.Where
	Lease  string
	// DLQQueue is the queue whose DLQ was searched, DLQFind what the
	// dead-letter page highlights.
	DLQQueue, DLQFind string
}

func (c *Console) find(r *http.Request) (string, any, error) {
	f := map[string]string{}
	for _, k := range []string{"key", "queue", "group", "message_id", "dedup_id", "idempotency_key"} {
		f[k] = strings.TrimSpace(r.FormValue(k))
	}
	d := findData{Form: f, Queues: names(c.cfg.Queues)}
	if f["key"] == "" && f["queue"] == "" {
		return "find", d, nil // the empty form
	}
	l := operator.Lookup{Namespace: c.cfg.Namespace, Key: f["key"], Group: f["group"],
		MessageID: f["message_id"], DedupID: f["dedup_id"], IdempotencyKey: f["idempotency_key"]}
	if f["key"] == "" {
		u, err := c.queue(r)
		if err != nil {
			return "", nil, err
		}
		l.Queue = u
	}
	key, err := operator.ScopedKey(r.Context(), c.cfg.SQS, l)
	switch {
	case errors.Is(err, operator.ErrNoMessage):
		return "", nil, badRequest("with a queue, give the message's id, its dedup id or its idempotency-key")
	case errors.Is(err, operator.ErrNeedGroup):
		return "", nil, badRequest("%v", err)
	case err != nil:
		return "", nil, err
	}
	queue := l.Queue
	if queue == "" {
		queue = c.queueOfKey(key)
	}
	read := func(key string) (*dedup.Record, error) {
		return operator.ReadRecord(r.Context(), c.cfg.DB, c.cfg.DedupTable, key)
	}
	d.Where, err = operator.Find(r.Context(), c.cfg.SQS, read, operator.LocateRequest{QueueURL: queue, Key: key, Namespace: c.cfg.Namespace,
		MessageID: l.MessageID, Now: c.cfg.Now(), Max: c.cfg.DLQSearch, Wait: c.dlqWait()})
	if err != nil {
		return "", nil, err
	}
	key, rec := d.Where.Key, d.Where.Record
	d.Key = key
	if queue != "" {
		d.DLQQueue = sqsmsg.QueueName(queue)
		d.DLQFind = cmp.Or(l.IdempotencyKey, l.DedupID, l.MessageID)
		if d.Where.Dead != nil {
			d.DLQFind = d.Where.Dead.ID
		}
	}
	if rec == nil && d.Where.Dead == nil {
		return "", nil, notFound("no record for key %q in table %s: %s", key, c.cfg.DedupTable, d.Where.Verdict)
	}
	d.Record = rec
	if rec != nil {
		d.Lease = lease(rec, c.cfg.Now())
	}
	return "find", d, nil
}

// queueOfKey is the configured queue a scoped key names ("" when none).
func (c *Console) queueOfKey(key string) string {
	name := operator.KeyQueueName(key)
	for _, u := range c.cfg.Queues {
		if sqsmsg.QueueName(u) == name {
			return u
		}
	}
	return ""
}

// lease says how long a record's lease has left, or since when it ended
// ("" for a completed record).
func lease(r *dedup.Record, now time.Time) string {
	switch {
	case r.Status == dedup.StatusCompleted:
		return ""
	case r.LeaseUntil.After(now):
		left := r.LeaseUntil.Sub(now).Round(time.Millisecond)
		return left.String() + " left (until " + r.LeaseUntil.UTC().Format(time.RFC3339) + ")"
	}
	return "ended " + now.Sub(r.LeaseUntil).Round(time.Millisecond).String() + " ago (any worker may take it over)"
}

// ---- Dead letters

type dlqGroup struct {
	Group string
	Items []redrive.Listed
}

type dlqData struct {
	Queue, DLQ, DLQURL, Find string
	FIFO, Body, More         bool
	Groups                   []dlqGroup
	Count, PageSize          int
}

func (c *Console) dlqOf(r *http.Request) (operator.QueueInfo, error) {
	u, err := c.queue(r)
	if err != nil {
		return operator.QueueInfo{}, err
	}
	qi, err := operator.DescribeQueue(r.Context(), c.cfg.SQS, u)
	if err != nil {
		return qi, err
	}
	if qi.DLQURL == "" {
		return qi, notFound("queue %s has no dead-letter queue (no redrive policy)", qi.Name)
	}
	return qi, nil
}

func byGroup(ls []redrive.Listed) []dlqGroup {
	var out []dlqGroup
	at := map[string]int{}
	for _, l := range ls {
		i, ok := at[l.Group]
		if !ok {
			i = len(out)
			at[l.Group] = i
			out = append(out, dlqGroup{Group: l.Group})
		}
		out[i].Items = append(out[i].Items, l)
	}
	return out
}

func (c *Console) listDLQ(r *http.Request, qi operator.QueueInfo, groups []string, maxN int) ([]redrive.Listed, error) {
	res, err := redrive.Run(r.Context(), c.cfg.SQS, redrive.Config{DLQ: qi.DLQURL, Queue: qi.URL, Groups: groups, DryRun: true, Max: maxN,
		Wait: c.dlqWait(), Before: c.cfg.Now()})
	if err != nil {
		return nil, err
	}
	return res.Listed, nil
}

// dlqRow is a queue with a dead-letter queue, on the Dead letters index.
type dlqRow struct {
	Name, DLQ, Err string
	Waiting        int
}

func (c *Console) deadLetters(r *http.Request) (string, any, error) {
	if strings.TrimSpace(r.FormValue("queue")) == "" {
		// The index: every queue given that has a DLQ.
		var rows []dlqRow
		for _, u := range c.cfg.Queues {
			qi, err := operator.DescribeQueue(r.Context(), c.cfg.SQS, u)
			switch {
			case err != nil:
				rows = append(rows, dlqRow{Name: sqsmsg.QueueName(u), Err: err.Error()})
			case qi.DLQURL != "":
				rows = append(rows, dlqRow{Name: qi.Name, DLQ: sqsmsg.QueueName(qi.DLQURL), Waiting: qi.DLQDepth.Visible + qi.DLQDepth.InFlight})
			}
		}
		return "dlqs", rows, nil
	}
	qi, err := c.dlqOf(r)
	if err != nil {
		return "", nil, err
	}
	ls, err := c.listDLQ(r, qi, nil, c.cfg.PageSize)
	if err != nil {
		return "", nil, err
	}
	return "dlq", dlqData{Queue: qi.Name, DLQ: sqsmsg.QueueName(qi.DLQURL), DLQURL: qi.DLQURL, FIFO: qi.FIFO, Body: r.FormValue("body") == "1",
		Find: r.FormValue("find"), Groups: byGroup(ls), Count: len(ls), More: len(ls) >= c.cfg.PageSize, PageSize: c.cfg.PageSize}, nil
}

type previewData struct {
	dlqData
	QueueURL string
	Chosen   []string
	Before   int64
	CSRF     string
	Command  string
}

func (c *Console) redrivePreview(r *http.Request) (string, any, error) {
	qi, err := c.dlqOf(r)
	if err != nil {
		return "", nil, err
	}
	groups := c.groups(r)
	if qi.FIFO && len(groups) == 0 {
		return "", nil, badRequest("choose the groups to redrive (tick them on the Dead letters page)")
	}
	before := c.cfg.Now()
	ls, err := c.listDLQ(r, qi, groups, redriveMax)
	if err != nil {
		return "", nil, err
	}
	if len(ls) == 0 {
		return "", nil, conflict("nothing to redrive: %s holds no message of %s (redriven already?)", sqsmsg.QueueName(qi.DLQURL), groupList(groups))
	}
	cmd := "worker redrive --dlq " + qi.DLQURL + " --queue " + qi.URL
	for _, g := range groups {
		cmd += " --group " + g
	}
	return "preview", previewData{
		dlqData:  dlqData{Queue: qi.Name, DLQ: sqsmsg.QueueName(qi.DLQURL), FIFO: qi.FIFO, Groups: byGroup(ls), Count: len(ls), More: len(ls) >= redriveMax},
		QueueURL: qi.URL, Chosen: groups, Before: before.UnixMilli(), Command: cmd + " --dry-run",
		CSRF: c.tokens.issue("/dlq/redrive", url.Values{"queue": {qi.Name}, "group": groups,
			"before": {strconv.FormatInt(before.UnixMilli(), 10)}, "max": {strconv.Itoa(len(ls))}}),
	}, nil
}

// dlqWait is Config.DLQWait, a short poll when 0 (redrive.Config's 0
// means its default of 2s).
func (c *Console) dlqWait() time.Duration { return max(c.cfg.DLQWait, time.Millisecond) }

// redriveMax bounds a preview, and so a redrive from the console.
const redriveMax = 1000

func groupList(gs []string) string {
	if len(gs) == 0 {
		return "any group"
	}
	return "group " + strings.Join(gs, ", ")
}

func (c *Console) redrive(r *http.Request) (string, any, error) {
	qi, err := c.dlqOf(r)
	if err != nil {
		return "", nil, err
	}
	groups := c.groups(r)
	before, err1 := strconv.ParseInt(r.PostForm.Get("before"), 10, 64)
	maxN, err2 := strconv.Atoi(r.PostForm.Get("max"))
	if err1 != nil || err2 != nil || maxN < 1 || maxN > redriveMax || (qi.FIFO && len(groups) == 0) {
		return "", nil, badRequest("the redrive form is malformed (before, max, group): go back to the preview")
	}
	cfg := redrive.Config{DLQ: qi.DLQURL, Queue: qi.URL, Groups: groups, Max: maxN, Before: time.UnixMilli(before), Wait: c.dlqWait()}
	res, err := redrive.Run(r.Context(), c.cfg.SQS, cfg)
	c.log.Info("console: redrive", "dlq", qi.DLQURL, "queue", qi.URL, "groups", groups, "max", maxN, "moved", res.Moved,
		"left_newer", res.Left, "left_other_groups", res.Skipped, "err", err)
	if err != nil {
		return "", nil, fmt.Errorf("redrive stopped after moving %d messages: %w", res.Moved, err)
	}
	if res.Moved == 0 {
		return "", nil, conflict("nothing moved: %s holds no message of %s that was there at the preview (redriven already?)", sqsmsg.QueueName(qi.DLQURL), groupList(groups))
	}
	return "redriven", struct {
		redrive.Result
		Queue, DLQ string
		Groups     []string
	}{res, qi.Name, sqsmsg.QueueName(qi.DLQURL), groups}, nil
}

// ---- Stuck records

type stuckData struct {
	Table     string
	Records   []*dedup.Record
	Scanned   int
	Next      string
	ScanLimit int32
	Now       time.Time
}

func (c *Console) stuck(r *http.Request) (string, any, error) {
	return c.scanPage(r, "stuck", operator.Stuck)
}

// ---- Conflicts

func (c *Console) conflicts(r *http.Request) (string, any, error) {
	return c.scanPage(r, "conflicts", operator.Conflicts)
}

// scanPage renders one bounded Scan page of records (the stuck ones, the
// conflicting ones) from the key ?after= names.
func (c *Console) scanPage(r *http.Request, tmpl string,
	scan func(context.Context, operator.RecordsDB, string, time.Time, map[string]ddbtypes.AttributeValue, int32) (operator.StuckPage, error)) (string, any, error) {
	var start map[string]ddbtypes.AttributeValue
	if a := r.FormValue("after"); a != "" {
		if !utf8.ValidString(a) || len(a) > 2048 {
			return "", nil, badRequest("after=%q is not a key this page gave: start from the first page, /%s", a, tmpl)
		}
		start = map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: a}}
	}
	now := c.cfg.Now()
	p, err := scan(r.Context(), c.cfg.DB, c.cfg.DedupTable, now, start, c.cfg.ScanLimit)
	if err != nil {
		return "", nil, err
	}
	d := stuckData{Table: c.cfg.DedupTable, Records: p.Records, Scanned: p.Scanned, ScanLimit: c.cfg.ScanLimit, Now: now}
	if p.Next != nil {
		if s, ok := p.Next[dedup.AttrPK].(*ddbtypes.AttributeValueMemberS); ok {
			d.Next = s.Value
		}
	}
	return tmpl, d, nil
}

// ---- Forget

type recordData struct {
	Record      *dedup.Record
	Where       string
	Lease, CSRF string
}

func (c *Console) forgetConfirm(r *http.Request) (string, any, error) {
	key := r.FormValue("key")
	if key == "" {
		return "", nil, badRequest("which record? give key=<the scoped dedup key>")
	}
	rec, err := operator.ReadRecord(r.Context(), c.cfg.DB, c.cfg.DedupTable, key)
	if err != nil {
		return "", nil, err
	}
	if rec == nil {
		return "", nil, notFound("no record for key %q in table %s (forgotten already, or expired)", key, c.cfg.DedupTable)
	}
	w := operator.Locate(r.Context(), c.cfg.SQS, operator.LocateRequest{Key: key, Record: rec, Now: c.cfg.Now()})
	d := recordData{Record: rec, CSRF: c.tokens.issue("/forget", url.Values{"key": {rec.Key}, "token": {rec.Token}, "status": {rec.Status},
		"lease": {strconv.FormatInt(rec.LeaseUntil.UnixMilli(), 10)}}), Where: w.Verdict, Lease: lease(rec, c.cfg.Now())}
	return "forget", d, nil
}

func (c *Console) forget(r *http.Request) (string, any, error) {
	key, token, status := r.PostForm.Get("key"), r.PostForm.Get("token"), r.PostForm.Get("status")
	leaseMS, lerr := strconv.ParseInt(r.PostForm.Get("lease"), 10, 64)
	if key == "" || token == "" || status == "" || lerr != nil {
		return "", nil, badRequest("the forget form is malformed (key, token, status, lease): go back and reload it")
	}
	// Deleted only if the record is still the one the page showed.
	shown := &dedup.Record{Key: key, Token: token, Status: status, LeaseUntil: time.UnixMilli(leaseMS)}
	err := operator.Forget(r.Context(), c.cfg.DB, c.cfg.DedupTable, shown)
	c.log.Info("console: forget", "table", c.cfg.DedupTable, "key", key, "token", token, "status", status, "err", err)
	var changed *operator.ChangedError
	switch {
	case errors.As(err, &changed):
		return "", nil, conflict("%v. Reload the confirmation page to see the record as it is now.", err)
	case errors.Is(err, operator.ErrNoRecord), errors.Is(err, operator.ErrChanged):
		return "", nil, conflict("%v", err)
	case err != nil:
		return "", nil, err
	}
	return "done", doneData{What: "Deleted record " + key + " from " + c.cfg.DedupTable + ": its message's next delivery, or a redrive of it, runs the effect again.", Back: "/stuck"}, nil
}

type doneData struct{ What, Back string }

// ---- Outbox

type outboxGroup struct {
	Queue, QueueName, Group string
	Items                   []outbox.Item
	Held                    string
	Age                     time.Duration
}

func (c *Console) needOutbox() error {
	if c.cfg.OutboxTable == "" {
		return notFound("the console was given no outbox table (--outbox-table)")
	}
	return nil
}

// pendingGroups is outbox.ListPending's page, by group, oldest first.
func (c *Console) pendingGroups(r *http.Request) ([]outboxGroup, error) {
	items, err := outbox.ListPending(r.Context(), c.cfg.DB, c.cfg.OutboxTable, c.cfg.PageSize)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	var out []outboxGroup
	at := map[string]int{}
	for _, it := range items {
		k := it.Queue + "#" + it.Group
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, outboxGroup{Queue: it.Queue, QueueName: sqsmsg.QueueName(it.Queue), Group: it.Group, Age: now.Sub(it.Created).Round(time.Second)})
		}
		out[i].Items = append(out[i].Items, it)
		if it.Held != "" {
			out[i].Held = it.Held
		}
	}
	slices.SortStableFunc(out, func(a, b outboxGroup) int { return int(b.Age - a.Age) })
	return out, nil
}

func (c *Console) outbox(r *http.Request) (string, any, error) {
	if err := c.needOutbox(); err != nil {
		return "", nil, err
	}
	groups, err := c.pendingGroups(r)
	if err != nil {
		return "", nil, err
	}
	n := 0
	for _, g := range groups {
		n += len(g.Items)
	}
	return "outbox", struct {
		Table    string
		Groups   []outboxGroup
		More     bool
		PageSize int
	}{c.cfg.OutboxTable, groups, n >= c.cfg.PageSize, c.cfg.PageSize}, nil
}

func outboxTarget(r *http.Request) (queue, group string, err error) {
	queue, group = r.FormValue("queue"), r.FormValue("group")
	if queue == "" || group == "" || !strings.Contains(queue, "/") {
		return "", "", badRequest("which group? give queue=<the queue URL> and group=<the message group>")
	}
	return queue, group, nil
}

func (c *Console) outboxGroup(r *http.Request) (string, any, error) {
	if err := c.needOutbox(); err != nil {
		return "", nil, err
	}
	queue, group, err := outboxTarget(r)
	if err != nil {
		return "", nil, err
	}
	items, err := outbox.ListGroup(r.Context(), c.cfg.DB, c.cfg.OutboxTable, queue, group, c.cfg.PageSize)
	if err != nil {
		return "", nil, err
	}
	if len(items) == 0 {
		return "", nil, notFound("the outbox holds no message of group %q of %s", group, queue)
	}
	return "group", struct {
		Queue, QueueName, Group string
		Items                   []outbox.Item
		Body                    bool
	}{queue, sqsmsg.QueueName(queue), group, items, r.FormValue("body") == "1"}, nil
}

type heldData struct {
	Queue, QueueName, Group string
	Item                    outbox.Item
	Held                    outbox.Held
	CSRF                    string
}

func (c *Console) heldConfirm(r *http.Request, action string) (string, any, error) {
	if err := c.needOutbox(); err != nil {
		return "", nil, err
	}
	queue, group, err := outboxTarget(r)
	if err != nil {
		return "", nil, err
	}
	it, h, ok, err := outbox.HeldItem(r.Context(), c.cfg.DB, c.cfg.OutboxTable, queue, group)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, conflict("group %q of %s is not held (released or dropped already?)", group, sqsmsg.QueueName(queue))
	}
	csrf := c.tokens.issue(action, url.Values{"queue": {queue}, "group": {group}, "id": {it.ID}})
	return strings.TrimPrefix(action, "/outbox/"), heldData{Queue: queue, QueueName: sqsmsg.QueueName(queue), Group: group, Item: it, Held: h, CSRF: csrf}, nil
}

func (c *Console) releaseConfirm(r *http.Request) (string, any, error) {
	return c.heldConfirm(r, "/outbox/release")
}

func (c *Console) dropConfirm(r *http.Request) (string, any, error) {
	return c.heldConfirm(r, "/outbox/drop")
}

func (c *Console) release(r *http.Request) (string, any, error) {
	if err := c.needOutbox(); err != nil {
		return "", nil, err
	}
	queue, group, err := outboxTarget(r)
	if err != nil {
		return "", nil, err
	}
	id := r.PostForm.Get("id")
	if id == "" {
		return "", nil, badRequest("the release form is malformed (id): go back and reload it")
	}
	err = outbox.Release(r.Context(), c.cfg.DB, c.cfg.OutboxTable, queue, group, id)
	c.log.Info("console: outbox release", "table", c.cfg.OutboxTable, "queue", queue, "group", group, "id", id, "err", err)
	switch {
	case errors.Is(err, outbox.ErrNotHeld):
		return "", nil, conflict("not released: %v (released, dropped or held again since the page was shown: reload it)", err)
	case err != nil:
		return "", nil, err
	}
	return "done", doneData{What: "Released group " + group + " of " + sqsmsg.QueueName(queue) + ": the relay publishes it again from the held message.", Back: "/outbox"}, nil
}

func (c *Console) drop(r *http.Request) (string, any, error) {
	if err := c.needOutbox(); err != nil {
		return "", nil, err
	}
	queue, group, err := outboxTarget(r)
	if err != nil {
		return "", nil, err
	}
	id := r.PostForm.Get("id")
	if id == "" {
		return "", nil, badRequest("the drop form is malformed (id): go back and reload it")
	}
	err = outbox.Drop(r.Context(), c.cfg.DB, c.cfg.OutboxTable, queue, group, id)
	c.log.Info("console: outbox drop", "table", c.cfg.OutboxTable, "queue", queue, "group", group, "id", id, "err", err)
	switch {
	case errors.Is(err, outbox.ErrNotHeld):
		return "", nil, conflict("not dropped: %v", err)
	case err != nil:
		return "", nil, err
	}
	return "done", doneData{What: "Dropped message " + id + " of group " + group + " of " + sqsmsg.QueueName(queue) + ": marked dropped, never published; the rest of the group follows.", Back: "/outbox"}, nil
}
