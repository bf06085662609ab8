output "table_name" {
  description = "Name of the outbox table, for WORKER_OUTBOX_TABLE (the relay's, and a worker's whose effect sends through the outbox)."
  value       = aws_dynamodb_table.this.name
}

output "table_arn" {
  description = "ARN of the outbox table, for the relay's and the producers' IAM policies."
  value       = aws_dynamodb_table.this.arn
}

output "stream_arn" {
  description = "ARN of the table's stream (keys only), for the relay-lambda module's event source mapping."
  value       = aws_dynamodb_table.this.stream_arn
}

output "pending_index_name" {
  description = "Name of the sparse index of the groups with messages to publish (pending)."
  value       = local.pending_index
}

output "pending_index_arn" {
  description = "ARN of the pending index (<table ARN>/index/pending), which the relay queries."
  value       = "${aws_dynamodb_table.this.arn}/index/${local.pending_index}"
}

output "hash_key" {
  description = "Hash key of the table (pk, a string)."
  value       = local.hash_key
}

output "range_key" {
  description = "Range key of the table (sk, a number)."
  value       = local.range_key
}

output "ttl_attribute_name" {
  description = "TTL attribute of the table (ttl)."
  value       = local.ttl_attribute
}
