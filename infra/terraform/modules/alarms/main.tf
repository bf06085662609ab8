locals {
  prefix = coalesce(var.alarm_name_prefix, trimsuffix(var.queue_name, ".fifo"))
}

# Any message in the DLQ is a message whose effect did not run: a person should look.
resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  count = var.dlq_name == null ? 0 : 1

  alarm_name        = "${local.prefix}-dlq-not-empty"
  alarm_description = "Messages are waiting in ${var.dlq_name}: their effects did not run. Inspect them, fix the cause, then redrive."

  namespace   = "AWS/SQS"
  metric_name = "ApproximateNumberOfMessagesVisible"
  dimensions = {
    QueueName = var.dlq_name
  }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  # SQS stops sending metrics for an idle queue; idle means empty here.
  treat_missing_data = "notBreaching"

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags
}

resource "aws_cloudwatch_metric_alarm" "oldest_message_age" {
  alarm_name        = "${local.prefix}-oldest-message-age"
  alarm_description = "The oldest message in ${var.queue_name} is older than ${var.oldest_message_age_threshold_seconds} s: workers are down, too few, or a message group is stuck."

  namespace   = "AWS/SQS"
  metric_name = "ApproximateAgeOfOldestMessage"
  dimensions = {
    QueueName = var.queue_name
  }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = var.oldest_message_age_evaluation_periods
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = var.oldest_message_age_threshold_seconds
  treat_missing_data  = "notBreaching"

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags
}
