output "dlq_not_empty_alarm_arn" {
  description = "ARN of the DLQ-not-empty alarm, or null without dlq_name."
  value       = one(aws_cloudwatch_metric_alarm.dlq_not_empty[*].arn)
}

output "oldest_message_age_alarm_arn" {
  description = "ARN of the oldest-message-age alarm."
  value       = aws_cloudwatch_metric_alarm.oldest_message_age.arn
}

output "worker_alarm_arns" {
  description = "ARNs of the alarms on the worker's EMF metrics, by name (conflicts, leases-lost, permanent-failures, returned-near-redrive), the enabled ones only."
  value       = { for name, a in aws_cloudwatch_metric_alarm.worker : name => a.arn }
}

output "dedup_table_alarm_arns" {
  description = "ARNs of the dedup table's alarms, by name (throttles, system-errors); empty without dedup_table_name."
  value       = { for name, a in aws_cloudwatch_metric_alarm.dedup_table : name => a.arn }
}

output "lambda_alarm_arns" {
  description = "ARNs of the function's alarms, by name (errors, throttles); empty without lambda_function_name."
  value       = { for name, a in aws_cloudwatch_metric_alarm.lambda : name => a.arn }
}

output "ecs_running_tasks_alarm_arn" {
  description = "ARN of the tasks-below-desired alarm, or null without ecs_service_name."
  value       = one(aws_cloudwatch_metric_alarm.ecs_running_tasks[*].arn)
}

output "outbox_alarm_arns" {
  description = "ARNs of the outbox relay's alarms, by name (lag, failed); empty without outbox_table_name."
  value       = { for name, a in aws_cloudwatch_metric_alarm.outbox : name => a.arn }
}
