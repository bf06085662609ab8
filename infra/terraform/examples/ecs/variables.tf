variable "region" {
  description = "AWS region."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Base name of the queue (exactly-demo.fifo), its DLQ, the cluster and the service."
  type        = string
  default     = "exactly-demo"
}

variable "container_image" {
  description = "Image of the worker (entrypoint: the worker binary), built for ARM64."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets with a route to SQS, DynamoDB, CloudWatch Logs and the image registry."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the tasks (outbound HTTPS)."
  type        = list(string)
}

variable "alarm_actions" {
  description = "ARNs (SNS topics) notified by the alarms."
  type        = list(string)
  default     = []
}

variable "deletion_protection" {
  description = "Deletion protection of the tables. Set false for a stack you will destroy."
  type        = bool
  default     = true
}

variable "enable_outbox" {
  description = "Also create the outbox table (<name>-outbox) and the relay that publishes its messages to the demo queue."
  type        = bool
  default     = false
}

variable "enable_fanout" {
  description = "With enable_outbox, also create a FIFO topic (<name>-fanout.fifo) with the demo queue subscribed, and let the relay publish to it."
  type        = bool
  default     = false
}
