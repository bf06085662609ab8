output "dlq_not_empty_alarm_arn" {
  description = "ARN of the DLQ-not-empty alarm, or null without dlq_name."
  value       = one(aws_cloudwatch_metric_alarm.dlq_not_empty[*].arn)
}

output "oldest_message_age_alarm_arn" {
  description = "ARN of the oldest-message-age alarm."
  value       = aws_cloudwatch_metric_alarm.oldest_message_age.arn
}

output "worker_alarm_arns" {
  description = "ARNs of the alarms on the worker's EMF metrics, by name (conflicts, leases-lost, permanent-failures), the enabled ones only."
  value       = { for name, a in aws_cloudwatch_metric_alarm.worker : name => a.arn }
}

output "dedup_table_alarm_arns" {
  description = "ARNs of the dedup table's throttles and system-errors alarms, by name; empty without dedup_table_name."
  value = merge(
    { for a in aws_cloudwatch_metric_alarm.dedup_throttles : "throttles" => a.arn },
    { for a in aws_cloudwatch_metric_alarm.dedup_system_errors : "system-errors" => a.arn },
  )
}

output "lambda_alarm_arns" {
  description = "ARNs of the function's errors and throttles alarms, by name; empty without lambda_function_name."
  value = merge(
    { for a in aws_cloudwatch_metric_alarm.lambda_errors : "errors" => a.arn },
    { for a in aws_cloudwatch_metric_alarm.lambda_throttles : "throttles" => a.arn },
  )
}

output "ecs_running_tasks_alarm_arn" {
  description = "ARN of the tasks-below-desired alarm, or null without ecs_service_name."
  value       = one(aws_cloudwatch_metric_alarm.ecs_running_tasks[*].arn)
}
