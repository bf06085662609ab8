output "dlq_not_empty_alarm_arn" {
  description = "ARN of the DLQ-not-empty alarm, or null without dlq_name."
  value       = one(aws_cloudwatch_metric_alarm.dlq_not_empty[*].arn)
}

output "oldest_message_age_alarm_arn" {
  description = "ARN of the oldest-message-age alarm."
  value       = aws_cloudwatch_metric_alarm.oldest_message_age.arn
}
