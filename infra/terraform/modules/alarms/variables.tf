variable "queue_name" {
  description = "Name of the queue the worker consumes (with .fifo)."
  type        = string
}

variable "dlq_name" {
  description = "Name of its DLQ. Null skips the DLQ alarm."
  type        = string
  default     = null
}

variable "alarm_name_prefix" {
  description = "Prefix of the alarm names. Null means the queue name without .fifo."
  type        = string
  default     = null
}

variable "oldest_message_age_threshold_seconds" {
  description = "Alarm when the oldest message of the queue is at least this old, in seconds. A stuck message group shows here first."
  type        = number
  default     = 600

  validation {
    condition     = var.oldest_message_age_threshold_seconds > 0
    error_message = "The threshold must be positive."
  }
}

variable "oldest_message_age_evaluation_periods" {
  description = "Consecutive one-minute periods above the threshold before the age alarm fires."
  type        = number
  default     = 3

  validation {
    condition     = var.oldest_message_age_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "metrics_namespace" {
  description = "CloudWatch namespace of the worker's EMF metrics (Conflicts, LeasesLost, PermanentFailures, ...; dimension Queue)."
  type        = string
  default     = "exactly"

  validation {
    condition     = length(var.metrics_namespace) > 0 && !can(regex("^AWS/", var.metrics_namespace))
    error_message = "metrics_namespace must be a non-empty custom namespace (not AWS/...)."
  }
}

variable "conflicts_alarm_enabled" {
  description = "Alarm on the worker's Conflicts metric: a dedup key reused for another payload. Such a message never runs; a person decides."
  type        = bool
  default     = true
}

variable "conflicts_threshold" {
  description = "Conflicts in one minute above which the conflicts alarm fires."
  type        = number
  default     = 0

  validation {
    condition     = var.conflicts_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "leases_lost_alarm_enabled" {
  description = "Alarm on the worker's LeasesLost metric: a claim taken over while its effect ran (lease too short for the effect, or stalled workers)."
  type        = bool
  default     = true
}

variable "leases_lost_threshold" {
  description = "Leases lost in one minute above which the leases-lost alarm fires."
  type        = number
  default     = 0

  validation {
    condition     = var.leases_lost_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "permanent_failures_alarm_enabled" {
  description = "Alarm on the worker's PermanentFailures metric: messages whose effect failed for good and that go to the DLQ."
  type        = bool
  default     = true
}

variable "returned_near_redrive_alarm_enabled" {
  description = "Alarm on the worker's ReturnedNearRedrive metric (Lambda): messages handed back unstarted with at most one receive left before the redrive policy moves them, never run."
  type        = bool
  default     = true
}

variable "returned_near_redrive_threshold" {
  description = "Messages returned near the redrive limit in one minute above which the returned-near-redrive alarm fires."
  type        = number
  default     = 0

  validation {
    condition     = var.returned_near_redrive_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "permanent_failures_threshold" {
  description = "Permanent failures in one minute above which the permanent-failures alarm fires."
  type        = number
  default     = 0

  validation {
    condition     = var.permanent_failures_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "dedup_table_name" {
  description = "Name of the dedup table. Null skips the DynamoDB alarms (throttles, system errors)."
  type        = string
  default     = null
}

variable "dedup_table_operations" {
  description = "Operations whose ThrottledRequests and SystemErrors the DynamoDB alarms sum (DynamoDB publishes those per operation only). The worker's: PutItem (claim), UpdateItem (commit, extend, release), TransactWriteItems (commit with the effect's writes). At most 8 (CloudWatch takes 10 metrics per alarm)."
  type        = list(string)
  default     = ["PutItem", "UpdateItem", "TransactWriteItems"]

  validation {
    condition     = length(var.dedup_table_operations) >= 1 && length(var.dedup_table_operations) <= 8 && alltrue([for op in var.dedup_table_operations : can(regex("^[A-Z][A-Za-z]+$", op))])
    error_message = "Give 1 to 8 DynamoDB operation names, such as PutItem."
  }
}

variable "dedup_throttles_alarm_enabled" {
  description = "Alarm on throttling of the dedup table: ReadThrottleEvents, WriteThrottleEvents and ThrottledRequests (of dedup_table_operations), summed. Needs dedup_table_name."
  type        = bool
  default     = true
}

variable "dedup_throttles_threshold" {
  description = "Throttles per minute above which a minute counts as breaching."
  type        = number
  default     = 0

  validation {
    condition     = var.dedup_throttles_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "dedup_throttles_evaluation_periods" {
  description = "Consecutive breaching minutes before the throttles alarm fires. The worker retries throttled calls, so a short burst is absorbed."
  type        = number
  default     = 3

  validation {
    condition     = var.dedup_throttles_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "dedup_system_errors_alarm_enabled" {
  description = "Alarm on SystemErrors (HTTP 5xx) of the dedup table, summed over dedup_table_operations. Needs dedup_table_name."
  type        = bool
  default     = true
}

variable "dedup_system_errors_threshold" {
  description = "System errors per minute above which a minute counts as breaching."
  type        = number
  default     = 0

  validation {
    condition     = var.dedup_system_errors_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "dedup_system_errors_evaluation_periods" {
  description = "Consecutive breaching minutes before the system-errors alarm fires (rare 5xx are normal and retried)."
  type        = number
  default     = 3

  validation {
    condition     = var.dedup_system_errors_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "lambda_function_name" {
  description = "Name of the worker's Lambda function. Null skips the Lambda alarms (errors, throttles)."
  type        = string
  default     = null
}

variable "lambda_errors_alarm_enabled" {
  description = "Alarm on the function's Errors: failed inits, timeouts, crashes (failed messages are reported in batchItemFailures, not as errors). Needs lambda_function_name."
  type        = bool
  default     = true
}

variable "lambda_errors_threshold" {
  description = "Errors per minute above which a minute counts as breaching."
  type        = number
  default     = 0

  validation {
    condition     = var.lambda_errors_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "lambda_errors_evaluation_periods" {
  description = "Consecutive breaching minutes before the errors alarm fires."
  type        = number
  default     = 1

  validation {
    condition     = var.lambda_errors_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "lambda_throttles_alarm_enabled" {
  description = "Alarm on the function's Throttles. Needs lambda_function_name."
  type        = bool
  default     = true
}

variable "lambda_throttles_threshold" {
  description = "Throttles per minute above which a minute counts as breaching."
  type        = number
  default     = 0

  validation {
    condition     = var.lambda_throttles_threshold >= 0
    error_message = "The threshold must be at least 0."
  }
}

variable "lambda_throttles_evaluation_periods" {
  description = "Consecutive breaching minutes before the throttles alarm fires (the event source mapping retries throttled batches)."
  type        = number
  default     = 5

  validation {
    condition     = var.lambda_throttles_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "ecs_cluster_name" {
  description = "Name of the ECS cluster of the worker's service (Container Insights on). Needed with ecs_service_name."
  type        = string
  default     = null
}

variable "ecs_service_name" {
  description = "Name of the worker's ECS service. Null skips the running-tasks alarm."
  type        = string
  default     = null
}

variable "ecs_running_tasks_alarm_enabled" {
  description = "Alarm when the service runs fewer tasks than it desires: DesiredTaskCount - RunningTaskCount (Container Insights) above 0. Needs ecs_cluster_name and ecs_service_name, and Container Insights on the cluster."
  type        = bool
  default     = true
}

variable "ecs_running_tasks_evaluation_periods" {
  description = "Consecutive minutes with fewer running than desired tasks before the alarm fires: long enough for a deployment or a scale-out to start its tasks."
  type        = number
  default     = 5

  validation {
    condition     = var.ecs_running_tasks_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "outbox_table_name" {
  description = "Name of the outbox table the relay publishes from. Null skips the outbox alarms (lag, failed)."
  type        = string
  default     = null
}

variable "outbox_lag_alarm_enabled" {
  description = "Alarm on the relay's OutboxLag (Maximum): the age of the oldest message not yet published. Needs outbox_table_name."
  type        = bool
  default     = true
}

variable "outbox_lag_threshold_seconds" {
  description = "Alarm when the oldest message not yet published is older than this, in seconds. The Lambda relay's sweep runs every minute, so keep it above 60 there."
  type        = number
  default     = 60

  validation {
    condition     = var.outbox_lag_threshold_seconds > 0
    error_message = "The threshold must be positive."
  }
}

variable "outbox_lag_evaluation_periods" {
  description = "Consecutive one-minute periods above the threshold before the lag alarm fires."
  type        = number
  default     = 3

  validation {
    condition     = var.outbox_lag_evaluation_periods >= 1
    error_message = "At least one evaluation period."
  }
}

variable "outbox_failed_alarm_enabled" {
  description = "Alarm on the relay's OutboxFailed (Sum): messages SQS refused for good, never published. Needs outbox_table_name."
  type        = bool
  default     = true
}

variable "outbox_held_alarm_enabled" {
  description = "Alarm on the relay's OutboxHeldGroups (Maximum): groups held at a message SQS refused, waiting for worker outbox release or drop. Needs outbox_table_name."
  type        = bool
  default     = true
}

variable "outbox_reordered_alarm_enabled" {
  description = "Alarm on the relay's OutboxReordered (Sum): groups whose order SQS broke within a batch (relay --group-batch above 1), each held. Needs outbox_table_name."
  type        = bool
  default     = true
}

variable "alarm_actions" {
  description = "ARNs notified when an alarm fires (an SNS topic, usually)."
  type        = list(string)
  default     = []
}

variable "ok_actions" {
  description = "ARNs notified when an alarm clears."
  type        = list(string)
  default     = []
}

variable "tags" {
  description = "Tags for the alarms."
  type        = map(string)
  default     = {}
}
