output "table_name" {
  description = "Name of the dedup table, for WORKER_DEDUP_TABLE."
  value       = aws_dynamodb_table.this.name
}

output "table_arn" {
  description = "ARN of the dedup table, for the worker's IAM policy."
  value       = aws_dynamodb_table.this.arn
}

output "hash_key" {
  description = "Hash key of both tables (pk, a string)."
  value       = local.hash_key
}

output "ttl_attribute_name" {
  description = "TTL attribute of the dedup table."
  value       = var.ttl_attribute_name
}

output "ledger_table_name" {
  description = "Name of the ledger table, or null without create_ledger_table."
  value       = one(aws_dynamodb_table.ledger[*].name)
}

output "ledger_table_arn" {
  description = "ARN of the ledger table, or null without create_ledger_table."
  value       = one(aws_dynamodb_table.ledger[*].arn)
}
