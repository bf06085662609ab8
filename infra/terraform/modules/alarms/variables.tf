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
