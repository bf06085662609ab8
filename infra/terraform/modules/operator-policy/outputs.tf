output "read_policy_arn" {
  description = "ARN of the read policy (worker inspect, worker stuck)."
  value       = aws_iam_policy.read.arn
}

output "read_policy_json" {
  description = "The read policy's document, for a permission set's inline policy."
  value       = data.aws_iam_policy_document.read.json
}

output "forget_policy_arn" {
  description = "ARN of the forget policy (worker forget), or null without create_forget_policy."
  value       = one(aws_iam_policy.forget[*].arn)
}

output "forget_policy_json" {
  description = "The forget policy's document, or null without create_forget_policy."
  value       = one(data.aws_iam_policy_document.forget[*].json)
}

output "outbox_policy_arn" {
  description = "ARN of the outbox policy (worker outbox, release, drop), or null without outbox_table_arn."
  value       = one(aws_iam_policy.outbox[*].arn)
}

output "outbox_policy_json" {
  description = "The outbox policy's document, or null without outbox_table_arn."
  value       = one(data.aws_iam_policy_document.outbox[*].json)
}

output "console_read_policy_arn" {
  description = "ARN of the worker console's read-only policy, or null without create_console_policies."
  value       = one(aws_iam_policy.console_read[*].arn)
}

output "console_write_policy_arn" {
  description = "ARN of the worker console's read-write policy (worker console --write), or null without create_console_policies."
  value       = one(aws_iam_policy.console_write[*].arn)
}

output "console_read_policy_json" {
  description = "The console's read-only policy document, or null without create_console_policies."
  value       = one(data.aws_iam_policy_document.console_read[*].json)
}

output "console_write_policy_json" {
  description = "The console's read-write policy document, or null without create_console_policies."
  value       = one(data.aws_iam_policy_document.console_write[*].json)
}
