output "function_name" {
  description = "Name of the function."
  value       = aws_lambda_function.this.function_name
}

output "function_arn" {
  description = "ARN of the function."
  value       = aws_lambda_function.this.arn
}

output "role_arn" {
  description = "ARN of the function's role."
  value       = aws_iam_role.this.arn
}

output "role_name" {
  description = "Name of the function's role."
  value       = aws_iam_role.this.name
}

output "log_group_name" {
  description = "CloudWatch Logs group of the function."
  value       = aws_cloudwatch_log_group.this.name
}

output "event_source_mapping_uuid" {
  description = "UUID of the stream's event source mapping."
  value       = aws_lambda_event_source_mapping.stream.uuid
}

output "sweep_rule_arn" {
  description = "ARN of the EventBridge rule that schedules the sweep."
  value       = aws_cloudwatch_event_rule.sweep.arn
}

output "environment" {
  description = "The function's environment (the relay's WORKER_* settings and extras)."
  value       = local.environment
}
