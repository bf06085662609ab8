variable "region" {
  description = "AWS region."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Base name of the queue (exactly-demo.fifo), its DLQ and the function."
  type        = string
  default     = "exactly-demo"
}

variable "architecture" {
  description = "arm64 or x86_64; picks dist/worker-lambda-arm64.zip or dist/worker-lambda-amd64.zip."
  type        = string
  default     = "arm64"
}

variable "package_path" {
  description = "Zip with the bootstrap binary. Null means the one `make dist` writes under dist/ at the repository root."
  type        = string
  default     = null
}

variable "function_timeout" {
  description = "Function timeout in seconds. The queue's visibility timeout is set to 6 x this."
  type        = number
  default     = 10
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
