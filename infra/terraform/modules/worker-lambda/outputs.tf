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
  description = "Name of the function's role, to attach what a custom effect needs."
  value       = aws_iam_role.this.name
}

output "log_group_name" {
  description = "CloudWatch Logs group of the function."
  value       = aws_cloudwatch_log_group.this.name
}

output "event_source_mapping_uuids" {
  description = "UUIDs of the event source mappings, by queue key."
  value       = { for k, m in aws_lambda_event_source_mapping.this : k => m.uuid }
}

output "environment" {
  description = "The function's environment (WORKER_* settings and extras)."
  value       = local.environment
}
