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

# --- The worker's own metrics (CloudWatch EMF) --------------------------------
# The worker writes its counters as Embedded Metric Format: namespace
# var.metrics_namespace, one dimension Queue = the queue's name (with .fifo).
# CloudWatch only holds them where the worker emits EMF: always on Lambda, on
# ECS with --metrics-format emf or both. A counter that is not written has no
# data, which counts as fine here: nothing happened.
locals {
  worker_alarms = {
    conflicts = {
      enabled     = var.conflicts_alarm_enabled
      metric      = "Conflicts"
      threshold   = var.conflicts_threshold
      description = "A dedup key of ${var.queue_name} was reused for another payload: the message is never run and never acked, and goes to the DLQ. Find it with worker inspect; give it a new key, or worker forget the old record."
    }
    leases-lost = {
      enabled     = var.leases_lost_alarm_enabled
      metric      = "LeasesLost"
      threshold   = var.leases_lost_threshold
      description = "Claims on ${var.queue_name} were taken over while their effect ran: the lease (WORKER_LEASE) is too short for the effect, or workers stall. The fenced commit refuses the late worker, but an effect outside the commit's transaction (http, most custom effects) may have run twice: its downstream must honour the idempotency key."
    }
    permanent-failures = {
      enabled     = var.permanent_failures_alarm_enabled
      metric      = "PermanentFailures"
      threshold   = var.permanent_failures_threshold
      description = "Messages of ${var.queue_name} failed permanently and went to the DLQ: their effects did not run. Fix the cause, then worker redrive."
    }
    returned-near-redrive = {
      enabled     = var.returned_near_redrive_alarm_enabled
      metric      = "ReturnedNearRedrive"
      threshold   = var.returned_near_redrive_threshold
      description = "Lambda handed back messages of ${var.queue_name} unstarted (behind a failed message of their FIFO group, or with too little time left in the invocation) with at most one receive left: the redrive policy may move them to the DLQ without their ever running. Keep maxReceiveCount above the batch size and the function timeout above batch size x a message's time (docs/DEPLOY.md); see the worker's WARN lines for the messages."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "worker" {
  for_each = { for name, a in local.worker_alarms : name => a if a.enabled }

  alarm_name        = "${local.prefix}-${each.key}"
  alarm_description = each.value.description

  namespace   = var.metrics_namespace
  metric_name = each.value.metric
  dimensions = {
    Queue = var.queue_name
  }
  statistic           = "Sum"
  period              = 60
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags
}

# --- The dedup table ------------------------------------------------------------
# ReadThrottleEvents and WriteThrottleEvents are published per table;
# ThrottledRequests and SystemErrors only per table and operation, so each
# alarm sums its per-table metrics and one metric per operation the worker
# calls (metric math).
locals {
  dedup_alarms = {
    throttles = {
      enabled            = var.dedup_throttles_alarm_enabled
      table_metrics      = ["ReadThrottleEvents", "WriteThrottleEvents"]
      operation_metric   = "ThrottledRequests"
      threshold          = var.dedup_throttles_threshold
      evaluation_periods = var.dedup_throttles_evaluation_periods
      description        = "DynamoDB throttles requests to the dedup table ${coalesce(var.dedup_table_name, "-")}: claims and commits are retried and slow down; sustained, messages return to the queue and the backlog grows. On-demand tables throttle on hot keys or above their maximum throughput."
    }
    system-errors = {
      enabled            = var.dedup_system_errors_alarm_enabled
      table_metrics      = []
      operation_metric   = "SystemErrors"
      threshold          = var.dedup_system_errors_threshold
      evaluation_periods = var.dedup_system_errors_evaluation_periods
      description        = "DynamoDB answers 5xx to requests on the dedup table ${coalesce(var.dedup_table_name, "-")}. The worker retries; sustained, check the AWS Health Dashboard."
    }
  }
  # Metric query ids: a lowercase letter first.
  operation_ids = [for i in range(length(var.dedup_table_operations)) : "op${i}"]
}

resource "aws_cloudwatch_metric_alarm" "dedup_table" {
  for_each = { for name, a in local.dedup_alarms : name => a if a.enabled && var.dedup_table_name != null }

  alarm_name        = "${local.prefix}-dedup-table-${each.key}"
  alarm_description = each.value.description

  metric_query {
    id          = "total"
    label       = "${join(" + ", concat(each.value.table_metrics, [each.value.operation_metric]))} on the dedup table"
    expression  = "SUM(FILL([${join(", ", concat([for i in range(length(each.value.table_metrics)) : "table${i}"], local.operation_ids))}], 0))"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = each.value.table_metrics

    content {
      id = "table${metric_query.key}"

      metric {
        namespace   = "AWS/DynamoDB"
        metric_name = metric_query.value
        dimensions = {
          TableName = var.dedup_table_name
        }
        stat   = "Sum"
        period = 60
      }
    }
  }

  dynamic "metric_query" {
    for_each = var.dedup_table_operations

    content {
      id = local.operation_ids[metric_query.key]

      metric {
        namespace   = "AWS/DynamoDB"
        metric_name = each.value.operation_metric
        dimensions = {
          TableName = var.dedup_table_name
          Operation = metric_query.value
        }
        stat   = "Sum"
        period = 60
      }
    }
  }

  evaluation_periods  = each.value.evaluation_periods
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags
}

# --- The outbox relay (CloudWatch EMF) -------------------------------------------
# The relay writes its metrics in the same namespace with one dimension
# OutboxTable = the table's name: OutboxLag (seconds: the age of the oldest
# message not yet published, at each flush), OutboxFailed (messages SQS
# refused for good), OutboxHeldGroups (groups held at a message SQS
# refused, waiting for an operator) and OutboxReordered (groups whose order
# SQS broke within a batch, --group-batch above 1). CloudWatch holds them where the relay emits EMF: on
# Lambda, and on ECS with metrics_format emf or both (the relay-ecs default).
locals {
  outbox_alarms = {
    lag = {
      enabled            = var.outbox_lag_alarm_enabled
      metric             = "OutboxLag"
      statistic          = "Maximum"
      threshold          = var.outbox_lag_threshold_seconds
      evaluation_periods = var.outbox_lag_evaluation_periods
      comparison         = "GreaterThanThreshold"
      # A relay that writes nothing is down or not emitting EMF: unknown, not OK.
      missing     = "missing"
      description = "Messages committed to the outbox ${coalesce(var.outbox_table_name, "-")} wait more than ${var.outbox_lag_threshold_seconds} s to be published: the relay is down, too slow, or fails to send (see OutboxFailed and its log)."
    }
    failed = {
      enabled            = var.outbox_failed_alarm_enabled
      metric             = "OutboxFailed"
      statistic          = "Sum"
      threshold          = 0
      evaluation_periods = 1
      comparison         = "GreaterThanThreshold"
      missing            = "notBreaching"
      description        = "SQS refused messages of the outbox ${coalesce(var.outbox_table_name, "-")} for good for what they hold (characters SQS does not take, ...): the relay marked them failed and did not publish them. Its log says which queue and why."
    }
    held = {
      enabled            = var.outbox_held_alarm_enabled
      metric             = "OutboxHeldGroups"
      statistic          = "Maximum"
      threshold          = 0
      evaluation_periods = 1
      comparison         = "GreaterThanThreshold"
      # A relay that writes nothing is the lag alarm's.
      missing     = "notBreaching"
      description = "The relay holds message groups of the outbox ${coalesce(var.outbox_table_name, "-")}: SQS refused one of their messages for a reason the producer could not know (the queue's MaximumMessageSize lowered under it, ...), and nothing more of those groups is published. worker outbox shows which (held: why); fix the cause and run worker outbox release --queue Q --group G, or skip the message with worker outbox drop --queue Q --group G --id ID."
    }
    reordered = {
      enabled            = var.outbox_reordered_alarm_enabled
      metric             = "OutboxReordered"
      statistic          = "Sum"
      threshold          = 0
      evaluation_periods = 1
      comparison         = "GreaterThanThreshold"
      missing            = "notBreaching"
      description        = "SQS broke the order of message groups of the outbox ${coalesce(var.outbox_table_name, "-")} (relay --group-batch above 1): it took a message of a group after refusing an earlier one in the same batch, so consumers may have got the later ones first. The relay holds each such group; worker outbox shows it (held: Reordered: ...). Check what the consumers did, then worker outbox release or drop."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "outbox" {
  for_each = { for name, a in local.outbox_alarms : name => a if a.enabled && var.outbox_table_name != null }

  alarm_name        = "${local.prefix}-outbox-${each.key}"
  alarm_description = each.value.description

  namespace   = var.metrics_namespace
  metric_name = each.value.metric
  dimensions = {
    OutboxTable = var.outbox_table_name
  }
  statistic           = each.value.statistic
  period              = 60
  evaluation_periods  = each.value.evaluation_periods
  comparison_operator = each.value.comparison
  threshold           = each.value.threshold
  treat_missing_data  = each.value.missing

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags
}

# --- Lambda -----------------------------------------------------------------------
# The worker reports failed messages in batchItemFailures and never fails an
# invocation for them: an Error is a failed init (a bad setting), a timeout or
# a crash.
locals {
  lambda_alarms = {
    errors = {
      enabled            = var.lambda_errors_alarm_enabled
      metric             = "Errors"
      threshold          = var.lambda_errors_threshold
      evaluation_periods = var.lambda_errors_evaluation_periods
      description        = "Invocations of ${coalesce(var.lambda_function_name, "-")} failed: a failed init (its log says which setting), a timeout or a crash. Failed messages alone never fail an invocation."
    }
    throttles = {
      enabled            = var.lambda_throttles_alarm_enabled
      metric             = "Throttles"
      threshold          = var.lambda_throttles_threshold
      evaluation_periods = var.lambda_throttles_evaluation_periods
      description        = "Invocations of ${coalesce(var.lambda_function_name, "-")} are throttled: reserved concurrency below the event source mapping's maximum concurrency, or the account's limit. The backlog grows."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "lambda" {
  for_each = { for name, a in local.lambda_alarms : name => a if a.enabled && var.lambda_function_name != null }

  alarm_name        = "${local.prefix}-lambda-${each.key}"
  alarm_description = each.value.description

  namespace   = "AWS/Lambda"
  metric_name = each.value.metric
  dimensions = {
    FunctionName = var.lambda_function_name
  }
  statistic           = "Sum"
  period              = 60
  evaluation_periods  = each.value.evaluation_periods
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags
}

# --- ECS --------------------------------------------------------------------------
# Running tasks against the service's desired count, both from Container
# Insights: autoscaling owns the desired count, so a fixed threshold would
# miss a service scaled out to 4 with 2 running, or fire on one scaled in on
# purpose. The difference must stay above 0 for several minutes: a deployment
# or a scale-out starts tasks within that time; a crash loop never catches up.
resource "aws_cloudwatch_metric_alarm" "ecs_running_tasks" {
  count = var.ecs_service_name != null && var.ecs_running_tasks_alarm_enabled ? 1 : 0

  alarm_name        = "${local.prefix}-ecs-tasks-below-desired"
  alarm_description = "Fewer tasks of ${var.ecs_service_name} run than it wants: tasks fail to start or keep stopping (image, secrets, health check, subnets), or Fargate lacks capacity. See the service's events."

  metric_query {
    id          = "missing"
    label       = "Desired tasks not running"
    expression  = "desired - running"
    return_data = true
  }

  metric_query {
    id = "desired"

    metric {
      namespace   = "ECS/ContainerInsights"
      metric_name = "DesiredTaskCount"
      dimensions = {
        ClusterName = var.ecs_cluster_name
        ServiceName = var.ecs_service_name
      }
      stat   = "Average"
      period = 60
    }
  }

  metric_query {
    id = "running"

    metric {
      namespace   = "ECS/ContainerInsights"
      metric_name = "RunningTaskCount"
      dimensions = {
        ClusterName = var.ecs_cluster_name
        ServiceName = var.ecs_service_name
      }
      stat   = "Average"
      period = 60
    }
  }

  evaluation_periods  = var.ecs_running_tasks_evaluation_periods
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  # No data means Container Insights is off for the cluster (or the service
  # is gone): INSUFFICIENT_DATA, not OK.
  treat_missing_data = "missing"

  alarm_actions = var.alarm_actions
  ok_actions    = var.ok_actions
  tags          = var.tags

  lifecycle {
    precondition {
      condition     = var.ecs_cluster_name != null
      error_message = "ecs_service_name needs ecs_cluster_name (Container Insights publishes per cluster and service)."
    }
  }
}
