package outbox

// Waiting is how many combined Writes wait on the line of (queue, group),
// for tests that need Writes queued before a transaction ends.
func (o *Outbox) Waiting(queue, group string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l := o.lines[partitionKey(queue, group)]; l != nil {
		return len(l.waiting)
	}
	return 0
}

// ShardOf is the pending index's shard of a group.
func ShardOf(queue, group string) string { return shardOf(partitionKey(queue, group)) }
